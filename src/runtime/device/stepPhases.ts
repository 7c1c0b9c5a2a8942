import { noteStep } from '../../comm/stallInspector.ts';
import type { FaultPlan } from '../faults/faultPlan.ts';

/** Time in collectives, of it blocked on other devices, and bytes moved since the last call. */
export interface CommStats {
  commMs: number;
  idleMs: number;
  bytes: number;
}
const NO_COMM: CommStats = { commMs: 0, idleMs: 0, bytes: 0 };

/** Where a step's time went: compute, and sync (what is not compute, collectives inside compute included). */
export interface StepTimes {
  computeMs: number;
  syncMs: number;
  idleMs: number;
  bytes: number;
}

const sleeper = new Int32Array(new SharedArrayBuffer(4));
/** Blocks the thread for `ms` (a straggler's extra compute time). */
function sleepSync(ms: number): void {
  if (ms > 0) Atomics.wait(sleeper, 0, 0, ms);
}

/**
 * What happens beside a device's step, at the boundaries of its phases (the strategy's beforeStep,
 * compute, the update and afterStep): the stall inspector learns the step; the phases are timed,
 * communication during compute (gradient buckets reduced during backward) counting as sync; and
 * the FaultPlan's faults for this device strike — a failure as compute begins, a straggler's
 * slowdown as it ends.
 */
export class StepPhases {
  private readonly slowdown: number;
  private t0 = 0;
  private t1 = 0;
  private t2 = 0;
  private before = NO_COMM;
  private during = NO_COMM;

  constructor(
    private readonly takeCommStats: () => CommStats = () => NO_COMM,
    private readonly faults: FaultPlan,
    private readonly rank: number,
  ) {
    this.slowdown = faults.slowdownFor(rank);
  }

  /** Drops what was communicated outside any step (the strategy's start). */
  discardCommStats(): void {
    this.takeCommStats();
  }

  begin(step: number): void {
    noteStep(step);
    this.t0 = performance.now();
  }

  computeBegins(step: number): void {
    if (this.faults.failsAt(this.rank, step)) throw new Error(`injected failure at step ${step}`);
    this.t1 = performance.now();
    this.before = this.takeCommStats();
  }

  computeEnds(): void {
    if (this.slowdown > 1) sleepSync((performance.now() - this.t1) * (this.slowdown - 1));
    this.t2 = performance.now();
    this.during = this.takeCommStats();
  }

  /** The step is over: its times. */
  end(): StepTimes {
    const t3 = performance.now();
    const { before, during } = this;
    const after = this.takeCommStats();
    return {
      computeMs: this.t2 - this.t1 - during.commMs,
      syncMs: this.t1 - this.t0 + during.commMs + (t3 - this.t2),
      idleMs: before.idleMs + during.idleMs + after.idleMs,
      bytes: before.bytes + during.bytes + after.bytes,
    };
  }
}
