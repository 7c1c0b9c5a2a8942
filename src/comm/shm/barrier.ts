/**
 * A reusable barrier for `parties` threads over 2 + parties Int32 words of a SharedArrayBuffer:
 * [count, generation, arrived[0..parties)]. The last arriver resets the count and bumps the
 * generation; the others wait (guarded: abort word, optional timeout) for the generation to move.
 * `arrived[p]` records the generation party p last reached, so a timeout can name who is missing.
 * Works on worker threads and on the main thread (Node allows Atomics.wait there).
 */
import { CommTimeoutError } from './errors.ts';
import { waitWhileEqual, type WaitOptions } from './wait.ts';

const COUNT = 0,
  GEN = 1,
  ARRIVED = 2;

export class Barrier {
  /** Int32 words a barrier for `parties` occupies. */
  static words(parties: number): number {
    return 2 + parties;
  }

  /** A barrier on a fresh SharedArrayBuffer (post `barrier.i32` and `parties` to share it). */
  static create(parties: number, opts: WaitOptions = {}): Barrier {
    return new Barrier(new Int32Array(new SharedArrayBuffer(Barrier.words(parties) * 4)), 0, parties, opts);
  }

  constructor(
    readonly i32: Int32Array,
    readonly base: number,
    readonly parties: number,
    readonly opts: WaitOptions = {},
    /** how error messages name a party ('rank' for a communicator) */
    readonly partyLabel = 'party',
  ) {
    if (!(i32.buffer instanceof SharedArrayBuffer))
      throw new TypeError('Barrier needs an Int32Array over a SharedArrayBuffer');
    if (!Number.isInteger(parties) || parties < 1)
      throw new RangeError(`Barrier parties must be a positive integer, got ${parties}`);
    if (base < 0 || base + Barrier.words(parties) > i32.length)
      throw new RangeError('Barrier words fall outside the Int32Array');
  }

  /**
   * Wait until all parties arrived. `party` (0 ≤ party < parties) is recorded for diagnostics.
   * Returns the milliseconds spent waiting for the others.
   */
  wait(party?: number, opts: WaitOptions = this.opts): number {
    const { i32, base, parties } = this;
    const gen = Atomics.load(i32, base + GEN);
    // `arrived` is written after the count (and by the last arriver after the release), so while the
    // barrier holds, a party marked arrived has been counted: a waiter's report names at least one
    // party (the late one), never an empty list because a party was paused between the two writes
    if (Atomics.add(i32, base + COUNT, 1) === parties - 1) {
      Atomics.store(i32, base + COUNT, 0);
      Atomics.add(i32, base + GEN, 1);
      Atomics.notify(i32, base + GEN);
      if (party !== undefined) Atomics.store(i32, base + ARRIVED + party, (gen + 1) | 0);
      return 0;
    }
    if (party !== undefined) Atomics.store(i32, base + ARRIVED + party, (gen + 1) | 0);
    return waitWhileEqual(i32, base + GEN, gen, opts, () => {
      const missing = this.missing(gen);
      const who = missing.length
        ? `${this.partyLabel} ${missing.join(', ')} had not arrived`
        : `${this.partyLabel}s did not all arrive`;
      return new CommTimeoutError(
        `${opts.observer ?? (party !== undefined ? `${this.partyLabel} ${party}` : `a ${this.partyLabel}`)} waited more than ${opts.timeoutMs} ms at a barrier: ${who}`,
        missing,
      );
    });
  }

  /** Parties that have not arrived at the barrier of generation `gen` (needs `party` in wait()). */
  missing(gen = Atomics.load(this.i32, this.base + GEN)): number[] {
    const out: number[] = [];
    for (let p = 0; p < this.parties; p++) {
      if (Atomics.load(this.i32, this.base + ARRIVED + p) !== ((gen + 1) | 0)) out.push(p);
    }
    return out;
  }
}
