/**
 * When the run evaluates, decided from the config (and a resumed set's state) alone so every
 * device of every process agrees without talking; and, with early stopping, the holds: the last
 * step the devices may run before device 0's verdict on an evaluation lets them go on or stops them
 * (the stop protocol carries it: runtime/job/stop/protocol.ts).
 */
import type { RunConfig } from '../../config/runConfig.ts';
import type { SetState } from '../checkpoint/checkpointSet.ts';

/** Whether the evaluation after epoch `epoch` (0-based) is due: every evalEvery epochs, and after the last. */
export function evalDue(config: RunConfig, epoch: number): boolean {
  const { evalEvery, epochs } = config.train;
  return epoch === epochs - 1 || (evalEvery > 0 && (epoch + 1) % evalEvery === 0);
}

/** Whether any metric is watched (best checkpoint, early stopping): their record lives in checkpoint sets. */
export function tracksMetrics(config: RunConfig): boolean {
  const { best, earlyStopping } = config.train;
  // an unresolved 'auto' watches nothing (trackedGoals)
  return (best !== false && best !== 'auto') || earlyStopping !== false;
}

/**
 * A run resumed at an epoch boundary evaluates that epoch again before its first step when a
 * watched metric's record lacks it: a set at an epoch's end is written before the epoch's
 * evaluation (or a graceful stop skipped it), so the tracker would miss one evaluation.
 */
export function reevaluatesAtStart(config: RunConfig, state: SetState | null | undefined): boolean {
  if (!state || !tracksMetrics(config)) return false;
  const { step, stepsPerEpoch } = state;
  if (step === 0 || step % stepsPerEpoch !== 0 || !evalDue(config, step / stepsPerEpoch - 1)) return false;
  const records = [state.tracking?.best, state.tracking?.earlyStopping].filter((r) => r !== undefined);
  return records.length === 0 || records.some((r) => r!.lastStep < step);
}

/** The last step of epoch `epoch`. */
const lastStepOf = (epoch: number, stepsPerEpoch: number) => (epoch + 1) * stepsPerEpoch - 1;

/**
 * The first hold of a run with early stopping (null: none): the last step before the first verdict.
 * A resumed run that evaluates at its start holds before its first step.
 */
export function firstHold(
  config: RunConfig,
  stepsPerEpoch: number,
  resumed: SetState | null | undefined,
): number | null {
  if (!config.train.earlyStopping) return null;
  const start = resumed?.step ?? 0;
  if (reevaluatesAtStart(config, resumed)) return start - 1;
  return holdAfter(config, stepsPerEpoch, Math.floor(start / stepsPerEpoch) - 1);
}

/**
 * The hold after the verdict on epoch `epoch`'s evaluation: the last step of the next epoch that
 * evaluates, unless that is the run's last epoch (nothing to stop early then: null).
 */
export function holdAfter(config: RunConfig, stepsPerEpoch: number, epoch: number): number | null {
  if (!config.train.earlyStopping) return null;
  for (let e = epoch + 1; e < config.train.epochs - 1; e++) if (evalDue(config, e)) return lastStepOf(e, stepsPerEpoch);
  return null;
}
