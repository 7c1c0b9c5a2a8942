/**
 * Point-to-point messages through one mailbox per ordered rank pair: header words in the control
 * block [STATE, TAG, TOTAL, CHUNK] and a payload area in the arena. The sender waits for the slot
 * to be empty, copies a chunk in and sets STATE=1; the receiver waits for STATE=1, checks tag and
 * length, copies out and sets STATE=0. A send returns once its last chunk is in the mailbox
 * (safely buffered). Messages between a pair arrive in order; tags are checked, not matched.
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

  private payload(src: number, dst: number, length: number): Float32Array {
    return this.arena.f32(this.layout.mailboxData + (src * this.layout.size + dst) * this.layout.mailboxBytes, length);
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
      if (m > 0) this.payload(this.rank, dest, m).set(buf.subarray(off, off + m));
      Atomics.store(c, h + TAG, tag);
      Atomics.store(c, h + TOTAL, n);
      Atomics.store(c, h + CHUNK, m);
      Atomics.store(c, h + STATE, FULL);
      Atomics.notify(c, h + STATE);
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
