/** Frames from one peer for one collective (or one send/recv tag), in arrival order, with one reader. */
import type { Frame } from './frame.ts';

export class FrameQueue {
  private frames: (Frame | undefined)[] = [];
  private head = 0;
  private waiter:
    | { resolve: (f: Frame) => void; reject: (e: Error) => void; timer: NodeJS.Timeout; since: number }
    | undefined;
  private error: Error | undefined;

  get waiting(): boolean {
    return this.waiter !== undefined;
  }

  /** performance.now() when the reader began its current wait; undefined while it does not wait */
  get waitingSince(): number | undefined {
    return this.waiter?.since;
  }

  get isEmpty(): boolean {
    return this.head >= this.frames.length;
  }

  push(f: Frame): void {
    if (this.error) return;
    const w = this.waiter;
    if (w) {
      this.waiter = undefined;
      clearTimeout(w.timer);
      w.resolve(f);
    } else this.frames.push(f);
  }

  /**
   * The next frame; rejects with `onTimeout()` after `ms` without one, or with the queue's failure.
   * `stall` (the stall inspector): once the wait has lasted `afterMs`, `warn` is called once and the
   * wait goes on — on the same timer, so a wait that ends in time costs nothing more.
   */
  take(ms: number, onTimeout: () => Error, stall?: { afterMs: number; warn: (since: number) => void }): Promise<Frame> {
    if (this.head < this.frames.length) {
      const f = this.frames[this.head]!;
      this.frames[this.head++] = undefined;
      if (this.head === this.frames.length) {
        this.frames = [];
        this.head = 0;
      }
      return Promise.resolve(f);
    }
    if (this.error) return Promise.reject(this.error);
    if (this.waiter) return Promise.reject(new Error('internal: two readers on one frame queue'));
    return new Promise<Frame>((resolve, reject) => {
      const expire = () => {
        this.waiter = undefined;
        reject(onTimeout());
      };
      const since = performance.now();
      const warnFirst = stall !== undefined && stall.afterMs < ms;
      const timer = setTimeout(
        warnFirst
          ? () => {
              const w = this.waiter!;
              w.timer = setTimeout(expire, ms - stall.afterMs);
              stall.warn(since);
            }
          : expire,
        warnFirst ? stall.afterMs : ms,
      );
      this.waiter = { resolve, reject, timer, since };
    });
  }

  /** Rejects the reader (now and later) with `err`; drops queued frames. */
  fail(err: Error): void {
    this.error ??= err;
    this.frames = [];
    this.head = 0;
    const w = this.waiter;
    if (w) {
      this.waiter = undefined;
      clearTimeout(w.timer);
      w.reject(err);
    }
  }
}
