/**
 * Two levels of ranks: L threads inside each of P processes. `local` connects the threads of this
 * process (shared memory); `cross` connects the thread with the same local index in every process
 * (TCP; under MPI a process runs one thread) — L independent cross worlds, one per local index,
 * so every thread carries an equal share of the inter-host traffic (as NCCL's hierarchical rings do).
 *
 * Global rank = process · L + local index; size = P · L.
 *
 * allreduce: reduce-scatter inside the process (thread ℓ now holds its slice summed over the
 * process), allreduce of that slice across processes (ℓ's cross world), allgather inside the
 * process. Each host sends 2(P−1)/P of the buffer in total, split over its L threads, instead of
 * every thread sending it all. Every element is summed in one fixed order, so all ranks hold
 * bit-identical results.
 *
 * Overlap (comm/overlap.ts): where the cross transport progresses in the background (TCP), so
 * does this communicator. An allreduce issued while the caller computes (hybrid's buckets
 * during backward) reduce-scatters inside the process at once — shared memory, the threads' own
 * memory work — and leaves its slice's allreduce across processes in flight, the link's time
 * hidden behind backward. Its allgather inside the process waits until the caller stops
 * computing: the threads of a process reach the end of their cross calls at different moments,
 * and the shared-memory collectives must be called in one order by all of them, so the deferred
 * allgathers then run in the order their allreduces were issued, and every local collective
 * issued after them waits its turn. Each element is summed as without overlap: the same bits.
 */
import { ownedSlice, type CollectiveStats, type Communicator, type ReduceOp } from './communicator.ts';
import { backgroundCollectives, type BackgroundCollectives } from './overlap.ts';

/**
 * Whether ranks `a` and `b` of a job of `threads` threads per process can send to each other: the
 * same process (shared memory) or the same thread index (its cross world). What a layout that
 * needs other pairs is refused for before it starts (runtime/run/linkChecks.ts).
 */
export function directLink(a: number, b: number, threads: number): boolean {
  return Math.floor(a / threads) === Math.floor(b / threads) || a % threads === b % threads;
}

export class HierarchicalCommunicator implements Communicator {
  readonly rank: number;
  readonly size: number;
  /** true where the cross transport's calls progress in the background (comm/overlap.ts) */
  readonly progressesInBackground: true | undefined;
  private readonly background: BackgroundCollectives | null;
  private callerComputing = false;
  /** allreduces issued while the caller computed: their allgathers, to run once it stops */
  private deferred: (() => Promise<void>)[] = [];
  /** the last local collective started behind the deferred allgathers; null when none waits */
  private localTail: Promise<void> | null = null;

  constructor(
    private readonly local: Communicator,
    private readonly cross: Communicator,
  ) {
    this.rank = cross.rank * local.size + local.rank;
    this.size = cross.size * local.size;
    this.background = backgroundCollectives(cross);
    this.progressesInBackground = this.background ? true : undefined;
  }

  /** The caller computes (true) until told false; then the deferred allgathers run, in order. */
  computing(on: boolean): void {
    this.background?.computing(on);
    this.callerComputing = on;
    if (on) return;
    const tasks = this.deferred;
    this.deferred = [];
    for (const task of tasks) void this.queue(task);
  }

  /** Runs `f` (local collectives) after the ones queued before it, and queues it: what follows waits for it. */
  private queue<T>(f: () => Promise<T>): Promise<T> {
    const result = (this.localTail ?? Promise.resolve()).then(f);
    const tail = result.then(
      () => {},
      () => {},
    );
    this.localTail = tail;
    void tail.then(() => {
      if (this.localTail === tail) this.localTail = null;
    });
    return result;
  }

  /** Runs `f` behind the queued local collectives, or at once when none is queued (as without overlap). */
  private inTurn<T>(f: () => Promise<T>): Promise<T> {
    return this.localTail ? this.queue(f) : f();
  }

  /** Which process and which thread of it hold global rank `r`. */
  private place(r: number): { process: number; thread: number } {
    return { process: Math.floor(r / this.local.size), thread: r % this.local.size };
  }

  allreduce(buf: Float32Array, op: ReduceOp = 'sum'): Promise<void> {
    if (!this.callerComputing) return this.inTurn(() => this.allreduceNow(buf, op));
    const crossed = this.inTurn(() => this.local.reduceScatter(buf, 'sum')).then(async ({ start, end }) => {
      const mine = buf.subarray(start, end);
      await this.cross.allreduce(mine, 'sum');
      return mine;
    });
    // a failure reaches the caller through the allgather's promise; until then it is handled
    crossed.catch(() => {});
    return new Promise<void>((resolve, reject) => {
      this.deferred.push(() => crossed.then((mine) => this.finish(buf, mine, op)).then(resolve, reject));
    });
  }

  private async allreduceNow(buf: Float32Array, op: ReduceOp): Promise<void> {
    const { start, end } = await this.local.reduceScatter(buf, 'sum');
    const mine = buf.subarray(start, end);
    await this.cross.allreduce(mine, 'sum');
    await this.finish(buf, mine, op);
  }

  /** `mine`, summed over every rank, divided for a mean and gathered by the process's threads. */
  private async finish(buf: Float32Array, mine: Float32Array, op: ReduceOp): Promise<void> {
    if (op === 'mean') for (let i = 0; i < mine.length; i++) mine[i] = mine[i]! / this.size;
    await this.local.allgather(buf);
  }

  /**
   * Global owned slices do not line up with the two levels' slices, so this is a full allreduce
   * (every rank ends with the whole result, which the contract allows); returns this rank's slice.
   */
  async reduceScatter(buf: Float32Array, op: ReduceOp = 'sum'): Promise<{ start: number; end: number }> {
    await this.allreduce(buf, op);
    return ownedSlice(buf.length, this.size, this.rank);
  }

  /** As a sum of buffers that are zero outside each rank's own slice. */
  async allgather(buf: Float32Array): Promise<void> {
    const { start, end } = ownedSlice(buf.length, this.size, this.rank);
    buf.fill(0, 0, start);
    buf.fill(0, end);
    await this.allreduce(buf, 'sum');
  }

  async broadcast(buf: Float32Array, root: number): Promise<void> {
    const from = this.place(root);
    // the root's thread index carries it across processes, then every process spreads it locally
    await this.inTurn(async () => {
      if (this.local.rank === from.thread) await this.cross.broadcast(buf, from.process);
      await this.local.broadcast(buf, from.thread);
    });
  }

  async barrier(): Promise<void> {
    await this.inTurn(async () => {
      await this.local.barrier();
      await this.cross.barrier();
      await this.local.barrier();
    });
  }

  private route(peer: number, what: string): Communicator {
    const p = this.place(peer),
      me = this.place(this.rank);
    if (p.process === me.process) return this.local;
    if (p.thread === me.thread) return this.cross;
    throw new Error(
      `${what}: rank ${this.rank} (process ${me.process}, thread ${me.thread}) has no direct link to rank ${peer} ` +
        `(process ${p.process}, thread ${p.thread}); point-to-point works within a process or between threads of the same index`,
    );
  }

  private peerIndex(c: Communicator, peer: number): number {
    return c === this.local ? this.place(peer).thread : this.place(peer).process;
  }

  async send(buf: Float32Array, dest: number, tag = 0): Promise<void> {
    const c = this.route(dest, 'send');
    await c.send(buf, this.peerIndex(c, dest), tag);
  }

  async recv(buf: Float32Array, source: number, tag = 0): Promise<void> {
    const c = this.route(source, 'recv');
    await c.recv(buf, this.peerIndex(c, source), tag);
  }

  /** Within the process (a pipeline's neighbours), the local transport's; false where the route has none. */
  trySend(buf: Float32Array, dest: number, tag = 0): boolean {
    const c = this.route(dest, 'send');
    return c.trySend?.(buf, this.peerIndex(c, dest), tag) ?? false;
  }

  async register(buf: Float32Array): Promise<void> {
    await this.inTurn(async () => this.local.register?.(buf));
  }

  takeStats(): CollectiveStats {
    const a = this.local.takeStats(),
      b = this.cross.takeStats();
    return { commMs: a.commMs + b.commMs, idleMs: a.idleMs + b.idleMs, bytes: a.bytes + b.bytes };
  }
}
