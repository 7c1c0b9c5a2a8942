/**
 * Point-to-point messages through one mailbox per ordered rank pair: header words in the control
 * block [STATE, TAG, TOTAL, CHUNK] and a payload area in the arena. The sender waits for the slot
 * to be empty, copies a chunk in and sets STATE=1; the receiver waits for STATE=1, checks tag and
 * length, copies out and sets STATE=0. A send returns once its last chunk is in the mailbox
 * (safely buffered); `trySend` sends only a message that fits an empty mailbox, never waiting.
 * Messages between a pair arrive in order; tags are checked, not matched.
 */
import type { Arena } from './arena.ts';
import { ShmUsageError } from './errors.ts';
import type { Layout } from './layout.ts';
import { MAILBOX_WORDS } from './layout.ts';
import { waitWhileEqual, type WaitOptions } from './wait.ts';
import { CommTimeoutError } from './errors.ts';

const STATE = 0,
  TAG = 1,
  TOTAL = 2,
  CHUNK = 3;
const EMPTY = 0,
  FULL = 1;

export class Mailboxes {
  private readonly capacity: number;
  /** per peer, the payload views last used to send and to receive: a pipeline sends one length over and over */
  private readonly sendViews: (Float32Array | undefined)[] = [];
  private readonly recvViews: (Float32Array | undefined)[] = [];
  constructor(
    private readonly control: Int32Array,
    private readonly layout: Layout,
    private readonly arena: Arena,
    private readonly rank: number,
  ) {
    this.capacity = layout.mailboxBytes / 4;
  }

  private header(src: number, dst: number): number {
    return this.layout.mailboxBase + (src * this.layout.size + dst) * MAILBOX_WORDS;
  }

  /** The mailbox's first `length` floats (the payload region sits below the heap: a view of it stays valid as the arena grows). */
  private payload(src: number, dst: number, length: number): Float32Array {
    const views = src === this.rank ? this.sendViews : this.recvViews,
      peer = src === this.rank ? dst : src;
    let v = views[peer];
    if (v?.length !== length)
      views[peer] = v = this.arena.f32(
        this.layout.mailboxData + (src * this.layout.size + dst) * this.layout.mailboxBytes,
        length,
      );
    return v;
  }

  /**
   * Sends `buf` only if that completes at once: it fits the mailbox and the receiver has taken the
   * previous message. Returns whether it did (false: nothing was sent).
   */
  trySend(buf: Float32Array, dest: number, tag: number): boolean {
    const n = buf.length,
      h = this.header(this.rank, dest),
      c = this.control;
    if (n > this.capacity || Atomics.load(c, h + STATE) !== EMPTY) return false;
    this.publish(buf, 0, n, dest, tag);
    return true;
  }

  /** Copies buf[off, off + m) into the (empty) mailbox to `dest` and marks it full. */
  private publish(buf: Float32Array, off: number, m: number, dest: number, tag: number): void {
    const h = this.header(this.rank, dest),
      c = this.control;
    if (m > 0) this.payload(this.rank, dest, m).set(off === 0 && m === buf.length ? buf : buf.subarray(off, off + m));
    Atomics.store(c, h + TAG, tag);
    Atomics.store(c, h + TOTAL, buf.length);
    Atomics.store(c, h + CHUNK, m);
    Atomics.store(c, h + STATE, FULL);
    Atomics.notify(c, h + STATE);
  }

  /** Returns ms spent waiting for the receiver to drain the mailbox. */
  send(buf: Float32Array, dest: number, tag: number, opts: WaitOptions): number {
    const n = buf.length,
      cap = this.capacity;
    if (dest === this.rank && n > cap) {
      throw new ShmUsageError(
        `send to self (rank ${dest}) of ${n} floats does not fit the ${cap}-float mailbox and would deadlock; raise mailboxBytes or copy locally`,
      );
    }
    const h = this.header(this.rank, dest);
    const c = this.control;
    let waited = 0;
    let off = 0;
    do {
      const m = Math.min(cap, n - off);
      waited += waitWhileEqual(
        c,
        h + STATE,
        FULL,
        opts,
        () =>
          new CommTimeoutError(
            `${opts.observer} waited more than ${opts.timeoutMs} ms to send to rank ${dest}: rank ${dest} has not received the previous message`,
            [dest],
          ),
      );
      this.publish(buf, off, m, dest, tag);
      off += m;
    } while (off < n);
    return waited;
  }

  /**
   * Returns ms spent waiting for the sender. A tag or length mismatch throws `ShmUsageError`
   * (the caller aborts the job, so the sender does not wait forever).
   */
  recv(buf: Float32Array, source: number, tag: number, opts: WaitOptions): number {
    const n = buf.length;
    const h = this.header(source, this.rank);
    const c = this.control;
    let waited = 0;
    let off = 0;
    do {
      waited += waitWhileEqual(
        c,
        h + STATE,
        EMPTY,
        opts,
        () =>
          new CommTimeoutError(
            `${opts.observer} waited more than ${opts.timeoutMs} ms to receive from rank ${source}: rank ${source} has not sent`,
            [source],
          ),
      );
      const gotTag = Atomics.load(c, h + TAG),
        total = Atomics.load(c, h + TOTAL),
        m = Atomics.load(c, h + CHUNK);
      if (gotTag !== tag || total !== n) {
        throw new ShmUsageError(
          `rank ${this.rank} expected a message of ${n} floats with tag ${tag} from rank ${source}, but rank ${source} sent ${total} floats with tag ${gotTag} ` +
            '(the shm transport delivers messages between two ranks in order; match sends and receives in order, with the same length)',
        );
      }
      if (m > 0) buf.set(this.payload(source, this.rank, m), off);
      Atomics.store(c, h + STATE, EMPTY);
      Atomics.notify(c, h + STATE);
      off += m;
    } while (off < n);
    return waited;
  }
}
