/**
 * A mutex in one Int32 word of a SharedArrayBuffer (0 free, 1 locked, 2 locked with waiters;
 * Drepper's futex mutex with Atomics.compareExchange / exchange / wait / notify). Not reentrant.
 * Blocking is guarded like every wait here: an abort word or a timeout ends it with an error.
 * Usable from worker threads and the main thread.
 */
import { CommTimeoutError } from './errors.ts';
import { waitWhileEqual, type WaitOptions } from './wait.ts';

const FREE = 0,
  LOCKED = 1,
  CONTENDED = 2;

export class Mutex {
  /** A mutex on a fresh SharedArrayBuffer; share it by posting `mutex.i32` (and `index`). */
  static create(opts: WaitOptions = {}): Mutex {
    return new Mutex(new Int32Array(new SharedArrayBuffer(4)), 0, opts);
  }

  constructor(
    readonly i32: Int32Array,
    readonly index = 0,
    readonly opts: WaitOptions = {},
  ) {
    if (!(i32.buffer instanceof SharedArrayBuffer))
      throw new TypeError('Mutex needs an Int32Array over a SharedArrayBuffer');
    if (!Number.isInteger(index) || index < 0 || index >= i32.length)
      throw new RangeError(`Mutex index ${index} is outside the Int32Array`);
  }

  tryLock(): boolean {
    return Atomics.compareExchange(this.i32, this.index, FREE, LOCKED) === FREE;
  }

  /** Blocks until acquired; returns the milliseconds spent waiting. */
  lock(opts: WaitOptions = this.opts): number {
    const { i32, index } = this;
    let c = Atomics.compareExchange(i32, index, FREE, LOCKED);
    if (c === FREE) return 0;
    const t0 = performance.now();
    const timeout = opts.timeoutMs ?? 0;
    if (c !== CONTENDED) c = Atomics.exchange(i32, index, CONTENDED);
    while (c !== FREE) {
      const left = timeout > 0 ? timeout - (performance.now() - t0) : 0;
      if (timeout > 0 && left <= 0) throw this.timeoutError(opts);
      waitWhileEqual(i32, index, CONTENDED, { ...opts, timeoutMs: timeout > 0 ? left : 0 }, () =>
        this.timeoutError(opts),
      );
      c = Atomics.exchange(i32, index, CONTENDED);
    }
    return performance.now() - t0;
  }

  unlock(): void {
    const { i32, index } = this;
    const prev = Atomics.sub(i32, index, 1);
    if (prev === LOCKED) return;
    if (prev === FREE) {
      Atomics.store(i32, index, FREE);
      throw new Error('Mutex.unlock() called on a mutex that was not locked');
    }
    Atomics.store(i32, index, FREE);
    Atomics.notify(i32, index, 1);
  }

  /** Runs `fn` holding the lock (released even if `fn` throws). */
  withLock<T>(fn: () => T): T {
    this.lock();
    try {
      return fn();
    } finally {
      this.unlock();
    }
  }

  get locked(): boolean {
    return Atomics.load(this.i32, this.index) !== FREE;
  }

  private timeoutError(opts: WaitOptions): CommTimeoutError {
    return new CommTimeoutError(
      `${opts.observer ?? 'a thread'} waited more than ${opts.timeoutMs} ms for a mutex (word ${this.index})`,
    );
  }
}
