/**
 * Where a stopped run ended, as the result, its events and the messages report it: the steps done,
 * and the epoch of the last one, 0-based like every epoch the run reports (onEpoch, 'epoch' and
 * 'eval' events); messages for people add one ("epoch 2/4").
 */
import type { StopDecision } from './controlSide.ts';

export interface StopPoint {
  /** global steps done: the run's last step was step − 1 */
  step: number;
  /** the (0-based) epoch of that last step; 0 when none ran */
  epoch: number;
  signal: string;
}

/**
 * The stop point of an agreed stop (undefined: the run was not stopped before its natural end).
 * `firstStep`: where a resumed run started (a stop before its first step is reported there).
 */
export function stoppedAt(
  decision: StopDecision | null | undefined,
  stepsPerEpoch: number,
  epochs: number,
  firstStep = 0,
): StopPoint | undefined {
  if (!decision || decision.lastStep + 1 >= stepsPerEpoch * epochs) return undefined;
  const step = Math.max(decision.lastStep + 1, firstStep);
  return { step, epoch: step === 0 ? 0 : Math.floor((step - 1) / stepsPerEpoch), signal: decision.signal };
}
