/**
 * Setup-time exchange of handles (SharedArrayBuffer objects cannot travel through Atomics) over a
 * BroadcastChannel named after the world: structured clone shares a SharedArrayBuffer, so each
 * rank gets its peers' buffers once and afterwards reads them directly. Used by `register`;
 * never on the data path.
 */
import { BroadcastChannel } from 'node:worker_threads';
import type { AbortFlag } from './abort.ts';
import { CommTimeoutError } from './errors.ts';
import { waitWhileEqual, type WaitOptions } from './wait.ts';

interface Envelope<T> {
  seq: number;
  rank: number;
  payload: T;
}

export class HandleExchange<T> {
  private readonly channel: BroadcastChannel;
  private readonly inbox = new Map<number, Map<number, T>>();
  private wake: (() => void) | null = null;
  private peersReady = false;
  private closed = false;

  constructor(
    worldId: string,
    private readonly rank: number,
    private readonly size: number,
    /** control word counting connected ranks, and the abort word */
    private readonly control: Int32Array,
    private readonly connectedWord: number,
    private readonly abort: AbortFlag,
    private readonly waitOpts: WaitOptions,
  ) {
    this.channel = new BroadcastChannel(`paratrain.shm.${worldId}`);
    this.channel.onmessage = (ev: unknown) => {
      const env = (ev as { data: Envelope<T> }).data;
      let m = this.inbox.get(env.seq);
      if (!m) this.inbox.set(env.seq, (m = new Map()));
      m.set(env.rank, env.payload);
      this.wake?.();
    };
    (this.channel as unknown as { unref(): void }).unref();
    // the channel exists now: count this rank as connected (messages posted from now on reach it)
    Atomics.add(control, connectedWord, 1);
    Atomics.notify(control, connectedWord);
  }

  /** Post this rank's payload for exchange round `seq` and resolve with every rank's (by rank). */
  async exchange(seq: number, payload: T): Promise<T[]> {
    if (this.closed) throw new Error('the communicator was closed');
    this.waitForPeers();
    this.channel.postMessage({ seq, rank: this.rank, payload } satisfies Envelope<T>);
    const ch = this.channel as unknown as { ref(): void; unref(): void };
    ch.ref();
    const t0 = performance.now();
    const timeout = this.waitOpts.timeoutMs ?? 0;
    try {
      for (;;) {
        const m = this.inbox.get(seq);
        if ((m?.size ?? 0) >= this.size - 1) break;
        this.abort.check(this.waitOpts.observer);
        if (timeout > 0 && performance.now() - t0 > timeout) {
          const missing = [];
          for (let r = 0; r < this.size; r++) if (r !== this.rank && !m?.has(r)) missing.push(r);
          throw new CommTimeoutError(
            `${this.waitOpts.observer ?? `rank ${this.rank}`} waited more than ${timeout} ms in register(): rank ${missing.join(', ')} had not registered`,
            missing,
          );
        }
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, Math.min(this.waitOpts.sliceMs ?? 100, 100));
          this.wake = () => {
            clearTimeout(timer);
            resolve();
          };
        });
        this.wake = null;
      }
    } finally {
      ch.unref();
    }
    const m = this.inbox.get(seq)!;
    this.inbox.delete(seq);
    const out: T[] = [];
    for (let r = 0; r < this.size; r++) out.push(r === this.rank ? payload : m.get(r)!);
    return out;
  }

  /** Blocks until every rank has created its channel (so no message is lost). */
  private waitForPeers(): void {
    if (this.peersReady) return;
    for (;;) {
      const c = Atomics.load(this.control, this.connectedWord);
      if (c >= this.size) break;
      waitWhileEqual(
        this.control,
        this.connectedWord,
        c,
        this.waitOpts,
        () =>
          new CommTimeoutError(
            `${this.waitOpts.observer ?? `rank ${this.rank}`} waited more than ${this.waitOpts.timeoutMs} ms for all ${this.size} ranks to connect (${c} connected)`,
          ),
      );
    }
    this.peersReady = true;
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.channel.close();
  }
}
