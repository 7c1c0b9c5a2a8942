/**
 * The holds of a run (protocol.ts): the last steps the devices may run before the main threads let
 * them go on, decided from the config and the run's options alone so every process computes the
 * same ones. Two reasons to hold, at an epoch's last step:
 *   - early stopping: device 0's verdict on the evaluation after that epoch (evalSchedule.ts);
 *   - epoch ends (a caller that may stop the run from onEpoch): every process's main thread has
 *     delivered the epoch's events, so an abort requested while they are handled stops every
 *     device before the next epoch's first step, as it does on one device.
 * A hold is released once each of its reasons is satisfied.
 */
import type { Agreement } from '../../../comm/tcp/agreement.ts';
import type { RunConfig } from '../../../config/runConfig.ts';
import type { SetState } from '../../checkpoint/checkpointSet.ts';
import { evalDue, firstHold, holdAfter } from '../../eval/evalSchedule.ts';

export class HoldSchedule {
  private readonly totalSteps: number;

  constructor(
    private readonly config: RunConfig,
    private readonly stepsPerEpoch: number,
    /** hold at every epoch's end until its events are delivered in every process */
    readonly epochEnds: boolean,
    private readonly resumed: SetState | null | undefined,
  ) {
    this.totalSteps = stepsPerEpoch * config.train.epochs;
  }

  /** The first hold (null: none). */
  first(): number | null {
    const start = this.resumed?.step ?? 0;
    // the end of the epoch the run starts in
    const epochEnd = this.epochEnds ? this.epochEndAtOrAfter(start) : null;
    return minOf(firstHold(this.config, this.stepsPerEpoch, this.resumed), epochEnd);
  }

  /** The hold after `hold` is released (null: none). */
  after(hold: number): number | null {
    const epochEnd = this.epochEnds ? this.epochEndAtOrAfter(hold + 1) : null;
    return minOf(holdAfter(this.config, this.stepsPerEpoch, this.epochOf(hold)), epochEnd);
  }

  /** Whether `hold` waits for early stopping's verdict on the evaluation after its epoch. */
  needsVerdict(hold: number): boolean {
    if (!this.config.train.earlyStopping || (hold + 1) % this.stepsPerEpoch !== 0) return false;
    const epoch = this.epochOf(hold);
    return epoch < this.config.train.epochs - 1 && evalDue(this.config, epoch);
  }

  /** The epoch whose last step `hold` is. */
  private epochOf(hold: number): number {
    return Math.floor((hold + 1) / this.stepsPerEpoch) - 1;
  }

  /** The last step of the epoch holding `step`, unless that is the run's last step (nothing follows it to hold). */
  private epochEndAtOrAfter(step: number): number | null {
    const end = (Math.floor(step / this.stepsPerEpoch) + 1) * this.stepsPerEpoch - 1;
    return end < this.totalSteps - 1 ? end : null;
  }
}

/**
 * Whether the devices hold at epoch ends: a run on several devices (threads or processes, which run
 * ahead of the main thread that hands their events to the callbacks) that onEpoch may stop through
 * `signal`. One device runs in the main thread, between its callbacks: it needs no hold.
 */
export function holdsAtEpochEnds(devices: number, o: { signal?: AbortSignal; onEpoch?: unknown }): boolean {
  return devices > 1 && o.signal !== undefined && o.onEpoch !== undefined;
}

/** What every process of a job must agree on for its holds: a process that holds at epoch ends waits for every other. */
export function holdAgreement(epochEnds: boolean): Agreement {
  return {
    what: 'stop setting',
    fields: { 'signal and onEpoch both given': epochEnds ? 'yes' : 'no' },
    source: 'TrainOptions',
    fix: 'give signal and onEpoch to every process of the job, or to none',
  };
}

const minOf = (a: number | null, b: number | null): number | null => (a === null ? b : b === null ? a : Math.min(a, b));
