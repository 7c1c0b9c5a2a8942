/**
 * The one blocking primitive: wait while a control word still holds a value, in slices of
 * `sliceMs` (default 100 ms), checking the abort word and an optional overall deadline between
 * slices, after an optional spin (fixed, or learned from the waiter's own waits: adaptiveSpin.ts).
 */
import { AbortFlag } from './abort.ts';
import type { AdaptiveSpin } from './adaptiveSpin.ts';
import { CommTimeoutError } from './errors.ts';

export interface WaitOptions {
  /**
   * job abort word: a raised abort makes the wait throw PeerFailedError. Waits on a world's
   * control block use that world's abort word even when this is not given.
   */
  abort?: AbortFlag;
  /** give up after this many ms (0 or undefined: wait as long as it takes) */
  timeoutMs?: number;
  /** busy-poll this many microseconds before sleeping (default 0) */
  spinMicros?: number;
  /** the waiter's learned spin (one per waiting thread): replaces spinMicros, and learns from every wait that ends */
  adaptiveSpin?: AdaptiveSpin;
  /** sleep slices between abort checks, ms (default 100) */
  sliceMs?: number;
  /** who is waiting, for error messages ('rank 3') */
  observer?: string;
  /** the stall inspector: once a wait has lasted `afterMs`, `warn` is called once (the wait goes on) */
  stall?: { afterMs: number; warn: (waitedMs: number) => void };
}

/**
 * Block while `Atomics.load(i32, index) === value`. Returns the milliseconds spent waiting.
 * `onTimeout` builds the error thrown when `timeoutMs` expires (default: a generic one).
 */
export function waitWhileEqual(
  i32: Int32Array,
  index: number,
  value: number,
  opts: WaitOptions = {},
  onTimeout?: () => Error,
): number {
  if (Atomics.load(i32, index) !== value) return 0;
  const t0 = performance.now();
  const learned = opts.adaptiveSpin;
  const spin = learned ? learned.micros : (opts.spinMicros ?? 0);
  if (!(spin > 0 && spinWhileEqual(i32, index, value, t0 + spin / 1000)))
    sleepWhileEqual(i32, index, value, t0, opts, onTimeout);
  const waited = performance.now() - t0;
  learned?.record(waited);
  return waited;
}

/*
 * The spin and the sleep are functions of their own so that V8's on-stack compilation of the hot
 * spin loop holds no code that has not run yet. Compiled inside waitWhileEqual, the code after the
 * loop had no type feedback, and V8 left the compiled loop in place while every wait that slept
 * (and every wake-up, through a closure) fell back to the interpreter (`--trace-deopt`: some 400
 * deopts in 1,000 steps of a 2-device job, most of them right after a device woke).
 */

/**
 * Busy-polls the word until it moves (true) or the clock passes `until` (false). The clock is
 * read every 4,096 polls (a few µs): each performance.now() returns a new heap number, and a
 * spin that read it every few polls filled the young generation within a second — the GC pauses
 * that followed stalled a pipeline's critical path.
 */
function spinWhileEqual(i32: Int32Array, index: number, value: number, until: number): boolean {
  for (let k = 1; ; k++) {
    if (Atomics.load(i32, index) !== value) return true;
    if ((k & 4095) === 0 && performance.now() > until) return false;
  }
}

/** Sleeps while the word holds `value`, in slices, checking the abort word, the deadline and the stall inspector between them. */
function sleepWhileEqual(
  i32: Int32Array,
  index: number,
  value: number,
  t0: number,
  opts: WaitOptions,
  onTimeout?: () => Error,
): void {
  const abort = opts.abort ?? AbortFlag.for(i32.buffer);
  const slice = opts.sliceMs ?? 100;
  const timeout = opts.timeoutMs ?? 0;
  const deadline = timeout > 0 ? t0 + timeout : Infinity;
  let warned = !opts.stall;
  for (;;) {
    abort?.check(opts.observer);
    const now = performance.now();
    if (now >= deadline) {
      throw onTimeout
        ? onTimeout()
        : new CommTimeoutError(`${opts.observer ?? 'a waiter'} waited more than ${timeout} ms`);
    }
    Atomics.wait(i32, index, value, Math.min(slice, deadline - now));
    // the word moved: the wait succeeded (even if an abort came right after; the next wait sees it)
    if (Atomics.load(i32, index) !== value) return;
    if (!warned && performance.now() - t0 >= opts.stall!.afterMs) {
      warned = true;
      opts.stall!.warn(performance.now() - t0);
    }
  }
}

/**
 * Block until `ready(Atomics.load(i32, index))` holds, waking on Atomics.notify of that word (and
 * at least every `sliceMs` to check the abort word). `guard` is an AbortFlag or full WaitOptions.
 * Returns the milliseconds spent waiting.
 */
export function waitUntil(
  i32: Int32Array,
  index: number,
  ready: (value: number) => boolean,
  guard?: AbortFlag | WaitOptions,
): number {
  const opts: WaitOptions = guard instanceof AbortFlag ? { abort: guard } : (guard ?? {});
  let waited = 0;
  for (;;) {
    const v = Atomics.load(i32, index);
    if (ready(v)) return waited;
    waited += waitWhileEqual(i32, index, v, opts);
  }
}
