import type { DivergenceSpec } from '../../config/runConfig.ts';
import { setName } from '../checkpoint/checkpointSet.ts';

/** Weight of the past in the smoothed loss: about the last ten steps count. */
const SMOOTHING = 0.9;
/** A loss of 0 (or below) counts as this, so that its logarithm stays finite. */
const FLOOR = 1e-30;

/**
 * How every error that stops a diverged run begins (this guard's and the non-finite guard's): such
 * a failure is the job's, not one device's, so no strategy goes on without the device (lostDevices.ts).
 */
export const DIVERGED = 'training diverged: ';

/** Whether a device's failure message says the training diverged (rather than that the device died). */
export const isDivergence = (message: string): boolean => message.includes(DIVERGED);

/** What the guard saw when it fired. */
export interface Divergence {
  /** the step (0-based) that completed the streak, and the first step of the streak */
  step: number;
  since: number;
  /** that step's loss, and the smoothed loss */
  loss: number;
  smoothed: number;
  /** the best smoothed loss before, and its step */
  best: number;
  bestStep: number;
  /** what the smoothed loss stayed above: factor × best (and the first loss), or the absolute bound */
  cause: 'factor' | 'bound';
}

/** What the message adds to the guard's verdict. */
export interface DivergenceContext {
  rank: number;
  epoch: number;
  /** optimizer.lr and train.clipGradNorm, for the fix */
  lr: number;
  clipGradNorm: number | undefined;
}

/**
 * Stops a run whose loss blows up while staying finite (NaN and Inf are the non-finite guard's,
 * badSteps.ts). Each device smooths its own step losses (an exponential moving average of their
 * logarithms over about ten steps, started at the first loss: a geometric mean, so one outlying
 * batch moves it by a factor, not by its size) and keeps the best smoothed value; a smoothed loss above
 * `factor` × that best, and above the first loss, or above `bound`, for `steps` steps in a row is
 * a divergence. Relative to the run's own best, so it holds for any loss's scale (cross-entropy,
 * MSE, CTC); the first loss stands in the limit so that a run whose loss fell near zero is not
 * stopped by a bump that leaves it below where it started. The streak of `steps` steps is the
 * warm-up: no decision before the smoothing has seen that many steps.
 *
 * Every device decides alone: the device that fires throws, and its failure stops every other
 * device of the job as any device's failure does (workerDevices.ts; across processes the job's
 * abort), the message naming it. The loop throws before the step's checkpoint hook, so no set is
 * written after the decision; the sets written during the streak are named in the message.
 */
export class DivergenceGuard {
  /** the moving average of the losses' logarithms (a moving geometric mean) */
  private logSmoothed = NaN;
  private first = NaN;
  private best = Infinity;
  private bestStep = -1;
  private streak = 0;
  private streakStart = 0;

  constructor(private readonly spec: DivergenceSpec | false) {}

  /**
   * One step's mean loss on this device. A NaN/Inf loss (the non-finite guard's) and a step without
   * samples are passed over. Returns the divergence when this step completes a streak of `steps`.
   */
  observe(loss: number, step: number): Divergence | null {
    const spec = this.spec;
    if (!spec || !Number.isFinite(loss)) return null;
    const log = Math.log(Math.max(loss, FLOOR));
    if (Number.isNaN(this.logSmoothed)) this.logSmoothed = log;
    else this.logSmoothed = SMOOTHING * this.logSmoothed + (1 - SMOOTHING) * log;
    const s = Math.exp(this.logSmoothed);
    if (Number.isNaN(this.first)) this.first = s;
    if (s < this.best) {
      this.best = s;
      this.bestStep = step;
    }
    const byBound = spec.bound !== undefined && s > spec.bound;
    const byFactor = s > spec.factor * this.best && s > this.first;
    if (!byBound && !byFactor) {
      this.streak = 0;
      return null;
    }
    if (this.streak === 0) this.streakStart = step;
    if (++this.streak < spec.steps) return null;
    return {
      step,
      since: this.streakStart,
      loss,
      smoothed: s,
      best: this.best,
      bestStep: this.bestStep,
      cause: byFactor ? 'factor' : 'bound',
    };
  }

  /** Observes the step's loss (`lossSum` over `samples`) and throws the run's error when it diverged. */
  stopIfDiverged(lossSum: number, samples: number, step: number, context: DivergenceContext): void {
    const d = this.observe(samples > 0 ? lossSum / samples : NaN, step);
    if (d && this.spec) throw new Error(divergenceMessage(d, this.spec, context));
  }
}

const num = (v: number): string =>
  Math.abs(v) >= 1e4 || (v !== 0 && Math.abs(v) < 1e-3) ? v.toExponential(2) : String(Number(v.toPrecision(3)));

/** The error of a diverged run: the device, the steps, the loss and the best, and the fix. */
export function divergenceMessage(d: Divergence, spec: DivergenceSpec, c: DivergenceContext): string {
  const above =
    d.cause === 'factor'
      ? `${spec.factor} × its best (and its first loss)`
      : `train.divergence.bound (${num(spec.bound!)})`;
  const clip =
    c.clipGradNorm === undefined ? 'train.clipGradNorm' : `a smaller train.clipGradNorm (now ${c.clipGradNorm})`;
  return (
    `${DIVERGED}device ${c.rank}'s training loss, smoothed over about 10 steps, stayed above ${above} for ${spec.steps} steps in a row ` +
    `(steps ${d.since + 1}–${d.step + 1}): at step ${d.step + 1} (epoch ${c.epoch + 1}) the loss is ${num(d.loss)} (smoothed ${num(d.smoothed)}), ` +
    `its best ${num(d.best)} (smoothed, step ${d.bestStep + 1}); lower optimizer.lr (now ${c.lr}) or clip the gradients (${clip}), ` +
    `or loosen train.divergence (false turns it off); checkpoint sets from ${setName(d.since)} on hold weights from after it began`
  );
}
