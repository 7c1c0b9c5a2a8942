import type { ReplicaView, StepInfo, Strategy } from '../../parallel/strategy.ts';
import { allFinite, anyBad } from '../../parallel/nonFinite.ts';
import type { FaultPlan } from '../faults/faultPlan.ts';
import { DIVERGED } from './divergenceGuard.ts';

/** Characters of a device's diagnosis that travel in the agreement when too many steps in a row were bad. */
const WHERE_CHARS = 96;

/** An injected NaN: poisons the replicated gradient, or this device's model-parallel shards' (FaultPlan `nan`). */
export type Poison = (replicated: Float32Array, shards: Float32Array) => void;

/** The injected NaN (FaultPlan `nan`) of device `rank` at `step`, applied after its backward; undefined: none. */
export function poisonAt(faults: FaultPlan, rank: number, step: number): Poison | undefined {
  const where = faults.poisonsAt(rank, step);
  if (!where) return undefined;
  return (replicated, shards) => {
    const g = where === 'shard' ? shards : replicated;
    if (g.length > 0) g[0] = NaN;
  };
}

/** Where a diverging step ran, for the error that stops the run. */
export interface BadStepAt {
  step: number;
  epoch: number;
  lossSum: number;
}

/**
 * Steps with a NaN/Inf loss or gradient are skipped, never applied: no optimizer update, no
 * momentum change. Who decides:
 *   - a strategy with applyUpdate decides itself (hybrid: the flag rides in the reduced gradient;
 *     sync/async: the device does not push; see the strategies);
 *   - otherwise (one device, bsp, bmuf, diloco, easgd): this guard checks the device's loss and gradient
 *     (one pass) and, in a lockstep strategy, the devices agree through `strategy.agree`, so all
 *     skip together (`skips`).
 * The guard counts the skipped steps (`record`). After `maxBadSteps` skipped in a row the run stops
 * with one error naming the device and the layer where the non-finite value first appeared
 * (`stopIfDiverged`: the loop throws, the end-of-run save never runs, so nothing is written after
 * the skipped steps; train() adds which checkpoint set there is to resume from).
 */
export class NonFiniteGuard {
  private streak = 0;
  private streakStart = 0;
  /** skipped steps on this device in the run, and in the current epoch */
  total = 0;
  inEpoch = 0;
  private readonly scratch = new Float32Array(1);

  constructor(
    private readonly maxBadSteps: number,
    private readonly rank: number,
    private readonly worldSize: number,
    private readonly strategy: Strategy,
    private readonly lr: number,
  ) {}

  /** Whether this step is skipped rather than applied by the device's optimizer (every device of a lockstep job agrees). */
  async skips(view: ReplicaView, info: StepInfo): Promise<boolean> {
    const finite = view.gradientsFinite ? view.gradientsFinite() : allFinite(view.grads);
    const bad = info.lossNonFinite === true || info.shardsNonFinite === true || !finite;
    return this.strategy.agree ? anyBad((v) => this.strategy.agree!(v), this.scratch, bad) : bad;
  }

  epochStarts(): void {
    this.inEpoch = 0;
  }

  /** Counts the step that ran at `step`: skipped, or applied (which ends a run of skipped steps). */
  record(skipped: boolean, step: number): void {
    if (!skipped) {
      this.streak = 0;
      return;
    }
    if (this.streak === 0) this.streakStart = step;
    this.streak++;
    this.total++;
    this.inEpoch++;
  }

  /** After maxBadSteps skipped in a row: locates the fault (`locate`: this device's diagnosis), agrees on it, and throws. */
  async stopIfDiverged(at: BadStepAt, locate: () => Promise<string | null>): Promise<void> {
    if (this.streak < this.maxBadSteps) return;
    const { step } = at;
    const mine = await locate();
    const origin = this.strategy.agree
      ? await this.agreeOnOrigin(mine)
      : mine === null
        ? null
        : { rank: this.rank, where: mine };
    const what = origin
      ? `non-finite values first appeared on device ${origin.rank} in ${origin.where}`
      : `the gradients summed over the devices were non-finite (no single device's were)`;
    const head = Number.isFinite(at.lossSum)
      ? `the gradients are non-finite at step ${step + 1} (epoch ${at.epoch + 1})`
      : `the loss is ${at.lossSum} at step ${step + 1} (epoch ${at.epoch + 1}) on device ${this.rank}`;
    throw new Error(
      `${DIVERGED}${head}; lower optimizer.lr (now ${this.lr}) or add schedule.warmupSteps ` +
        `(or raise train.maxBadSteps): ${this.streak} steps in a row (steps ${this.streakStart + 1}–${step + 1}) were skipped because ` +
        `${what}`,
    );
  }

  /** Every device learns every device's diagnosis (its text travels as character codes); the lowest rank that saw one wins. */
  private async agreeOnOrigin(mine: string | null): Promise<{ rank: number; where: string } | null> {
    const codes = new Float32Array(this.worldSize * WHERE_CHARS);
    const text = (mine ?? '').slice(0, WHERE_CHARS);
    for (let i = 0; i < text.length; i++) codes[this.rank * WHERE_CHARS + i] = text.charCodeAt(i);
    await this.strategy.agree!(codes);
    for (let r = 0; r < this.worldSize; r++) {
      const slot = codes.subarray(r * WHERE_CHARS, (r + 1) * WHERE_CHARS);
      const end = slot.indexOf(0);
      const where = String.fromCharCode(...slot.subarray(0, end < 0 ? WHERE_CHARS : end));
      if (where) return { rank: r, where };
    }
    return null;
  }
}
