/**
 * The Communicator of one MPI process: MPI's own (tuned) collectives do the work. See index.ts
 * for the API and the design; the MPI calls themselves are in native/mpi/paratrain_mpi.c.
 */
import { ownedSlice, type CollectiveStats, type Communicator, type ReduceOp } from '../communicator.ts';
import { CollectiveMismatchError } from '../errors.ts';
import { loadMpiAddon, mpiUnavailableReason, type MpiAddon, type MpiInitInfo } from './addon.ts';

const OPS: Record<ReduceOp, 0 | 1> = { sum: 0, mean: 1 };
/** Open MPI's MPI_TAG_UB is 2^31 − 1 (the standard guarantees only 32767; the addon checks the real bound). */
const MAX_TAG = 0x7fffffff;
/** Polling a pending send/recv: on every turn of the event loop for this long, then every millisecond. */
const SPIN_MS = 2;

/** A clear error for misuse or an MPI failure, naming this rank. */
export class MpiError extends Error {
  override readonly name = 'MpiError';
}

function int(what: string, v: unknown, lo: number, hi: number, rank: number): number {
  if (typeof v !== 'number' || !Number.isInteger(v) || v < lo || v > hi) {
    throw new RangeError(`MpiCommunicator (rank ${rank}): ${what} must be an integer in ${lo}…${hi}, got ${String(v)}`);
  }
  return v;
}

function checkBuffer(buf: unknown, rank: number, call: string): asserts buf is Float32Array {
  if (!(buf instanceof Float32Array))
    throw new TypeError(`MpiCommunicator (rank ${rank}): ${call} needs a Float32Array`);
}

const nextTurn = () => new Promise<void>((resolve) => setImmediate(resolve));
const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/**
 * Collectives are MPI's non-blocking ones (MPI_Iallreduce, MPI_Ireduce_scatter, MPI_Iallgatherv),
 * completed at once with MPI_Wait — the thread blocks, as in a blocking MPI call — unless the
 * caller computes (computing(true), comm/overlap.ts): then the call returns to the event loop and
 * MPI_Test is called once per turn, and MPI_Wait takes over once computing ends. Open MPI
 * progresses a non-blocking collective only inside MPI calls (no progress thread), so those tests
 * between the caller's layers are what moves it. Overlapped or not, a call is the same MPI
 * algorithm on the same buffer: the same bits.
 *
 * Stats: commMs is the wall time inside calls (inside MPI_Test and MPI_Wait for a collective, not
 * the turns between them). idleMs is always 0: MPI waits for late peers inside
 * its own blocking calls, which cannot be told apart from transfer time from outside. bytes is the
 * payload a bandwidth-optimal algorithm moves per rank (sent + received: 2·2(N−1)/N·n·4 for
 * allreduce, half that for reduceScatter/allgather, n·4 for a broadcast, a send or a recv); MPI
 * picks its own algorithm, so its real traffic may differ.
 */
export class MpiCommunicator implements Communicator {
  readonly rank: number;
  readonly size: number;
  /** MPI's library version string (MPI_Get_library_version) */
  readonly library: string;
  private readonly addon: MpiAddon;
  private commMs = 0;
  private bytes = 0;
  private closed = false;
  private failure: Error | undefined;
  /** the caller computes: collectives are polled between its turns instead of waited for */
  private busy = false;

  private constructor(addon: MpiAddon, rank: number, size: number, library: string) {
    this.addon = addon;
    this.rank = rank;
    this.size = size;
    this.library = library;
  }

  /**
   * Initialises MPI (MPI_Init_thread with MPI_THREAD_FUNNELED) in this thread — the main thread or
   * a worker thread; only this thread may use MPI afterwards — and returns this process's
   * communicator (a duplicate of MPI_COMM_WORLD). Run under `mpirun`; without it MPI starts a world
   * of one. Once per process: after close() MPI cannot be initialised again.
   */
  static async init(): Promise<MpiCommunicator> {
    const addon = loadMpiAddon();
    if (!addon) throw new MpiError(`the MPI transport is not available: ${mpiUnavailableReason()}`);
    if (addon.state() === 'finalized') {
      throw new MpiError(
        'MpiCommunicator.init: MPI was already finalised in this process (close() ends MPI for good; start a new process)',
      );
    }
    if (addon.state() === 'initialized') {
      throw new MpiError(
        'MpiCommunicator.init: MPI is already initialised in this process (one MpiCommunicator per process: use the existing one, from the thread that created it)',
      );
    }
    let info: MpiInitInfo;
    try {
      info = addon.init();
    } catch (err) {
      throw new MpiError(
        `MpiCommunicator.init: ${(err as Error).message} (run the job with mpirun; see README, Open MPI transport)`,
      );
    }
    if (info.provided < 1) {
      addon.finalize();
      throw new MpiError(
        `MpiCommunicator.init: this MPI provides thread level ${info.provided}; MPI_THREAD_FUNNELED (1) is needed to use it from a worker thread`,
      );
    }
    return new MpiCommunicator(addon, info.rank, info.size, info.library);
  }

  /** Runs one blocking MPI call (timed unless `timed` is false); an MPI failure makes this communicator unusable. */
  private call<T>(name: string, bytes: number, fn: () => T, timed = true): T {
    if (this.closed) throw new MpiError(`MpiCommunicator (rank ${this.rank}): ${name} after close()`);
    if (this.failure)
      throw new MpiError(
        `MpiCommunicator (rank ${this.rank}): ${name} after an earlier MPI failure: ${this.failure.message}`,
      );
    const t0 = performance.now();
    try {
      const out = fn();
      this.bytes += bytes;
      return out;
    } catch (err) {
      const e = err as Error & { code?: string };
      if (e.code === 'ERR_MPI') this.failure = e;
      if (e instanceof TypeError || e instanceof RangeError) throw e;
      throw new MpiError(`rank ${this.rank}: ${e.message}`);
    } finally {
      if (timed) this.commMs += performance.now() - t0;
    }
  }

  /** Collectives are polled in the event loop while the caller computes (comm/overlap.ts). */
  readonly progressesInBackground = true as const;

  /** While true, a collective returns to the event loop between MPI_Tests; once false, MPI_Wait completes it. */
  computing(on: boolean): void {
    this.busy = on;
  }

  async allreduce(buf: Float32Array, op: ReduceOp = 'sum'): Promise<void> {
    checkBuffer(buf, this.rank, 'allreduce');
    const code = this.op(op);
    await this.collective('allreduce', ((4 * (this.size - 1)) / this.size) * buf.byteLength, () =>
      this.addon.iallreduce(buf, code),
    );
  }

  async reduceScatter(buf: Float32Array, op: ReduceOp = 'sum'): Promise<{ start: number; end: number }> {
    checkBuffer(buf, this.rank, 'reduceScatter');
    const code = this.op(op);
    await this.collective('reduceScatter', ((2 * (this.size - 1)) / this.size) * buf.byteLength, () =>
      this.addon.ireduceScatter(buf, code),
    );
    return ownedSlice(buf.length, this.size, this.rank);
  }

  async allgather(buf: Float32Array): Promise<void> {
    checkBuffer(buf, this.rank, 'allgather');
    await this.collective('allgather', ((2 * (this.size - 1)) / this.size) * buf.byteLength, () =>
      this.addon.iallgather(buf),
    );
  }

  /** Posts a non-blocking collective; tests it once per turn while the caller computes, then waits for it. */
  private async collective(name: string, bytes: number, post: () => number): Promise<void> {
    const req = this.call(name, bytes, post);
    while (this.busy) {
      if (this.call(name, 0, () => this.addon.test(req)) !== false) return;
      await nextTurn();
    }
    this.call(name, 0, () => this.addon.wait(req));
  }

  async broadcast(buf: Float32Array, root: number): Promise<void> {
    checkBuffer(buf, this.rank, 'broadcast');
    int('broadcast root', root, 0, this.size - 1, this.rank);
    this.call('broadcast', this.size > 1 ? buf.byteLength : 0, () => this.addon.broadcast(buf, root));
  }

  async barrier(): Promise<void> {
    this.call('barrier', 0, () => this.addon.barrier());
  }

  /** Completes once MPI no longer needs `buf` (the receiver has it or MPI buffered it). */
  async send(buf: Float32Array, dest: number, tag = 0): Promise<void> {
    checkBuffer(buf, this.rank, 'send');
    int('send dest', dest, 0, this.size - 1, this.rank);
    int('send tag', tag, 0, MAX_TAG, this.rank);
    const req = this.call('send', buf.byteLength, () => this.addon.isend(buf, dest, tag));
    await this.complete(req, `send of ${buf.length} floats to rank ${dest} with tag ${tag}`);
  }

  /** The message must have exactly buf.length floats (as on the other transports). */
  async recv(buf: Float32Array, source: number, tag = 0): Promise<void> {
    checkBuffer(buf, this.rank, 'recv');
    int('recv source', source, 0, this.size - 1, this.rank);
    int('recv tag', tag, 0, MAX_TAG, this.rank);
    const what = `recv of ${buf.length} floats from rank ${source} with tag ${tag}`;
    const req = this.call('recv', buf.byteLength, () => this.addon.irecv(buf, source, tag));
    let got: number | boolean;
    try {
      got = await this.complete(req, what);
    } catch (err) {
      if (/truncat/i.test((err as Error).message)) {
        throw new CollectiveMismatchError(
          `rank ${this.rank}: ${what}: the message is longer than the buffer (${(err as Error).message})`,
        );
      }
      throw err;
    }
    if (got !== buf.length) {
      throw new CollectiveMismatchError(
        `rank ${this.rank}: ${what} expected ${buf.length} floats, but the message has ${String(got)}`,
      );
    }
  }

  /** Polls a pending request; the event loop keeps turning, so several sends/recvs can be in flight. */
  private async complete(req: number, what: string): Promise<number | boolean> {
    const t0 = performance.now();
    try {
      for (;;) {
        const done = this.call(what, 0, () => this.addon.test(req), false);
        if (done !== false) return done;
        if (performance.now() - t0 < SPIN_MS) await nextTurn();
        else await sleep(1);
      }
    } finally {
      this.commMs += performance.now() - t0; // the whole wait, polls and the gaps between them
    }
  }

  /** Ends every process of the job at once (MPI_Abort), printing `reason` on this rank's stderr. */
  abort(reason: string, exitCode = 1): never {
    this.addon.abort(reason, exitCode);
    throw new MpiError('unreachable: MPI_Abort returned');
  }

  takeStats(): CollectiveStats {
    const s = { commMs: this.commMs, idleMs: 0, bytes: this.bytes };
    this.commMs = 0;
    this.bytes = 0;
    return s;
  }

  /** Finalises MPI for this process (collective: every rank must call it). Idempotent. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.addon.finalize();
  }

  private op(op: ReduceOp): 0 | 1 {
    const code = Object.hasOwn(OPS, op) ? OPS[op] : undefined;
    if (code === undefined)
      throw new RangeError(`MpiCommunicator (rank ${this.rank}): op must be 'sum' or 'mean', got ${String(op)}`);
    return code;
  }
}
