import { addErrorCounts, type ErrorCounts } from '../../nn/loss.ts';
import type { StepInfo, StrategyStepStats } from '../../parallel/strategy.ts';
import type { EventSink } from '../events/events.ts';
import type { StepResult } from './gradientSource.ts';
import type { StepTimes } from './stepPhases.ts';

/** What one step of a device came to. */
export interface StepOutcome {
  result: StepResult;
  /** the most bytes of activations held for backward in the step */
  activationBytes: number;
  times: StepTimes;
  /** the update's: staleness, dropped, skipped (absent: a plain update) */
  stats: StrategyStepStats | undefined;
  /** the gradient norm before clipping (train.clipGradNorm; undefined: not clipped) */
  gradNorm: number | undefined;
}

/** A step whose update was skipped (a NaN/Inf loss or gradient). */
export const wasSkipped = (s: StepOutcome): boolean => s.stats?.skipped === true;

interface EpochSums {
  lossSum: number;
  correct: number;
  samples: number;
  computeMs: number;
  syncMs: number;
  idleMs: number;
  bytes: number;
  peakActivationBytes: number;
  errors?: ErrorCounts;
}

/** What a device reports of its training: each step's event, and its epoch's sums (the `rankEpoch` event). */
export class StepReporter {
  private sums: EpochSums = StepReporter.zero();
  private epochStart = 0;

  constructor(
    private readonly emit: EventSink,
    private readonly rank: number,
    private readonly stepsPerEpoch: number,
  ) {}

  private static zero(): EpochSums {
    return { lossSum: 0, correct: 0, samples: 0, computeMs: 0, syncMs: 0, idleMs: 0, bytes: 0, peakActivationBytes: 0 };
  }

  epochStarts(): void {
    this.epochStart = performance.now();
    this.sums = StepReporter.zero();
  }

  /** The step's event, and its part of the epoch's sums; `badSteps`: steps this device skipped so far in the run, this one included. */
  step(info: StepInfo, stepInEpoch: number, s: StepOutcome, badSteps: number): void {
    const { result: r, times } = s;
    const sum = this.sums;
    const skipped = wasSkipped(s);
    // a skipped step's non-finite loss stays out of the epoch's loss
    if (!skipped) sum.lossSum += r.lossSum;
    sum.correct += r.correct;
    sum.samples += r.samples;
    if (!skipped) sum.errors = addErrorCounts(sum.errors, r.errors);
    sum.computeMs += times.computeMs;
    sum.syncMs += times.syncMs;
    sum.idleMs += times.idleMs;
    sum.bytes += times.bytes;
    sum.peakActivationBytes = Math.max(sum.peakActivationBytes, s.activationBytes);
    this.emit({
      type: 'step',
      rank: this.rank,
      epoch: info.epoch,
      step: info.step,
      stepInEpoch,
      stepsPerEpoch: this.stepsPerEpoch,
      loss: r.samples ? r.lossSum / r.samples : 0,
      accuracy: r.samples ? r.correct / r.samples : 0,
      lr: info.lr,
      samples: r.samples,
      ...times,
      activationBytes: s.activationBytes,
      ...(s.stats ?? {}),
      ...(s.gradNorm !== undefined ? { gradNorm: s.gradNorm } : {}),
      ...(badSteps > 0 ? { badSteps } : {}),
    });
  }

  /** The epoch's sums; `badSteps`: steps skipped in it. */
  epochEnds(epoch: number, badSteps: number): void {
    this.emit({
      type: 'rankEpoch',
      rank: this.rank,
      epoch,
      ...this.sums,
      ...(badSteps > 0 ? { badSteps } : {}),
      seconds: (performance.now() - this.epochStart) / 1000,
    });
  }
}
