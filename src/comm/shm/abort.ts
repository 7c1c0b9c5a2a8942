/**
 * The job-wide abort word. Anyone (a rank, the main thread) may raise it once; the first raise
 * wins and records who raised it and why. Raising wakes every waiter on the control block, and
 * every guarded wait checks the word at least every `sliceMs`, so no rank stays blocked.
 */
import { PeerFailedError, UNKNOWN_PARTY } from './errors.ts';

const CLAIMED = 1,
  COMPLETE = 2;
const encoder = new TextEncoder();
const decoder = new TextDecoder();

export interface AbortSlots {
  flag: number;
  rank: number;
  reasonLen: number;
  /** byte offset of the reason text in the same buffer, and its capacity */
  reasonByte: number;
  reasonBytes: number;
}

export interface AbortInfo {
  rank: number;
  reason: string;
}

/** The abort flag living in each control block this thread knows (so any wait on it is abort-aware). */
const flagsByBuffer = new WeakMap<ArrayBufferLike, AbortFlag>();

export class AbortFlag {
  private readonly bytes: Uint8Array;
  constructor(
    readonly i32: Int32Array,
    private readonly slots: AbortSlots,
  ) {
    this.bytes = new Uint8Array(i32.buffer, i32.byteOffset + slots.reasonByte, slots.reasonBytes);
    flagsByBuffer.set(i32.buffer, this);
  }

  /** The abort flag of the control block `buffer`, when this thread has one for it. */
  static for(buffer: ArrayBufferLike): AbortFlag | undefined {
    return flagsByBuffer.get(buffer);
  }

  get aborted(): boolean {
    return Atomics.load(this.i32, this.slots.flag) !== 0;
  }

  /** Who aborted and why, or null. */
  info(): AbortInfo | null {
    const { i32, slots } = this;
    let f = Atomics.load(i32, slots.flag);
    if (f === 0) return null;
    // the raiser writes rank and reason between CLAIMED and COMPLETE: give it a moment
    for (let spins = 0; f === CLAIMED && spins < 100; spins++) {
      Atomics.wait(i32, slots.flag, CLAIMED, 1);
      f = Atomics.load(i32, slots.flag);
    }
    if (f !== COMPLETE) return { rank: UNKNOWN_PARTY, reason: 'aborted (details still being written)' };
    const len = Math.min(Atomics.load(i32, slots.reasonLen), this.bytes.length);
    const copy = new Uint8Array(len);
    copy.set(this.bytes.subarray(0, len));
    return { rank: Atomics.load(i32, slots.rank), reason: decoder.decode(copy) };
  }

  /**
   * Raise the abort (first caller wins; returns whether this call did) and wake every waiter on
   * `i32` (all of its words: waiters block on words of the control block).
   */
  raise(rank: number, reason: string): boolean {
    const { i32, slots } = this;
    const won = Atomics.compareExchange(i32, slots.flag, 0, CLAIMED) === 0;
    if (won) {
      let enc = encoder.encode(reason);
      if (enc.length > this.bytes.length) enc = enc.subarray(0, this.bytes.length);
      this.bytes.set(enc);
      Atomics.store(i32, slots.reasonLen, enc.length);
      Atomics.store(i32, slots.rank, rank);
      Atomics.store(i32, slots.flag, COMPLETE);
    }
    for (let i = 0; i < i32.length; i++) Atomics.notify(i32, i);
    return won;
  }

  /** Throws PeerFailedError if the job was aborted. */
  check(observer?: string): void {
    if (Atomics.load(this.i32, this.slots.flag) !== 0) throw this.error(observer);
  }

  error(observer?: string): PeerFailedError {
    const info = this.info() ?? { rank: UNKNOWN_PARTY, reason: '' };
    return new PeerFailedError(info.rank, info.reason, observer);
  }
}
