import type { Communicator } from '../comm/communicator.ts';
import { backgroundCollectives, eventLoopTurn, type BackgroundCollectives } from '../comm/overlap.ts';

/**
 * Gradient buckets all-reduced (mean) while backward goes on, as hybrid and ZeRO stage 1 reduce
 * them. Over a transport whose calls progress in the event loop (comm/overlap.ts) the transport
 * is told the caller computes from the first bucket that backward starts until backward ends, and
 * backward yields a turn of the event loop after each layer while a bucket is in flight; over
 * shared memory each bucket is reduced where it starts. Buckets started after backward (the one
 * at offset 0, which carries the NaN mark) are plain calls. The sums are the same either way.
 */
export class BucketsInFlight {
  private readonly background: BackgroundCollectives | null;
  private inFlight: Promise<void>[] = [];
  /** whether the transport was told that backward computes, and has not yet been told it ended */
  private computing = false;

  constructor(private readonly comm: Communicator) {
    this.background = backgroundCollectives(comm);
  }

  /** Backward has produced `grads`: its mean all-reduce starts. */
  startDuringBackward(grads: Float32Array): void {
    if (!this.computing) {
      this.computing = true;
      this.background?.computing(true);
    }
    this.start(grads);
  }

  /** What backward awaits after a layer: one turn of the event loop while buckets are in flight there. */
  turn(): Promise<void> | undefined {
    return this.background && this.inFlight.length > 0 ? eventLoopTurn() : undefined;
  }

  /** Backward has ended: the transport may hold the thread again (and finish what it deferred). */
  backwardEnded(): void {
    if (!this.computing) return;
    this.computing = false;
    this.background?.computing(false);
  }

  /** A bucket started after backward. */
  startAfterBackward(grads: Float32Array): void {
    this.start(grads);
  }

  /** Every bucket started this step, reduced. */
  async finish(): Promise<void> {
    const all = this.inFlight;
    this.inFlight = [];
    await Promise.all(all);
  }

  private start(grads: Float32Array): void {
    // each rank's gradient is already scaled by worldSize/globalBatch, so the mean is the global mean
    const bucket = this.comm.allreduce(grads, 'mean');
    // a failure is reported by finish's await; until then it is not an unhandled rejection
    bucket.catch(() => {});
    this.inFlight.push(bucket);
  }
}
