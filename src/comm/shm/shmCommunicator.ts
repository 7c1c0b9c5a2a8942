/**
 * The shared-memory Communicator of one rank (a worker thread).
 *
 * Data path: shared memory + Atomics only. Every collective writes a call descriptor and meets
 * the others at a barrier, where each rank checks that all called the same thing
 * (callDescriptor.ts); then the data moves zero-copy on registered buffers (`await
 * comm.register(buf)` on every rank, same order, same length) or through staging halves in the
 * arena otherwise (collectives.ts). Every rank gets bit-identical results, equal to a serial
 * float32 sum over ranks 0..G-1.
 *
 * Calls are synchronous under the hood (Atomics.wait) and return resolved promises; the `*Sync`
 * variants skip the promise. Any error inside a call aborts the job so no peer waits forever.
 */
import { ownedSlice, type CollectiveStats, type Communicator, type ReduceOp } from '../communicator.ts';
import { AbortFlag } from './abort.ts';
import { AdaptiveSpin } from './adaptiveSpin.ts';
import { Arena } from './arena.ts';
import { Barrier } from './barrier.ts';
import { CallDescriptors, OP_BARRIER } from './callDescriptor.ts';
import { checkBuffer, checkRank, checkTag, errorText, reduceOpCode } from './callChecks.ts';
import { ShmCollectives, type PathCounts } from './collectives.ts';
import { PeerFailedError, ShmUsageError } from './errors.ts';
import { HandleExchange } from './exchange.ts';
import {
  computeLayout,
  KERNEL_STATIC_BYTES,
  LAYOUT_VERSION,
  MAGIC,
  REASON_BYTES,
  TABLE_BYTES,
  type Layout,
} from './layout.ts';
import { Mailboxes } from './mailbox.ts';
import { Mutex } from './mutex.ts';
import { ReduceKernel } from './reduceKernel.ts';
import { loadShmNative } from './nativeReduce.ts';
import { Registry, type BufferHandle } from './registry.ts';
import { checkRegistrations, registrationHandle } from './registration.ts';
import type { WaitOptions } from './wait.ts';
import { reportStall } from '../stallInspector.ts';
import type { ShmInit } from './world.ts';

export class ShmCommunicator implements Communicator {
  readonly rank: number;
  readonly size: number;
  readonly worldId: string;

  private readonly control: Int32Array;
  private readonly layout: Layout;
  private readonly abortFlag: AbortFlag;
  private readonly waitOpts: WaitOptions;
  private readonly worldBarrier: Barrier;
  private readonly arena: Arena;
  private readonly registry: Registry;
  private readonly exchange: HandleExchange<BufferHandle>;
  private readonly mailboxes: Mailboxes;
  private readonly descriptors: CallDescriptors;
  private readonly collectives: ShmCollectives;

  private regSeq = 0;
  private readonly stats = { commMs: 0, idleMs: 0, bytes: 0 };

  /** Connect worker `init.rank` to its world (call once per rank, in that rank's thread). */
  static async connect(init: ShmInit): Promise<ShmCommunicator> {
    return new ShmCommunicator(init);
  }

  private constructor(init: ShmInit) {
    if (init?.kind !== 'paratrain.shm')
      throw new ShmUsageError('ShmCommunicator.connect: not an init object from world.rankInit(rank)');
    if (init.version !== LAYOUT_VERSION)
      throw new ShmUsageError(
        `ShmCommunicator.connect: init version ${init.version}, this code speaks ${LAYOUT_VERSION}`,
      );
    this.rank = init.rank;
    this.size = init.size;
    this.worldId = init.worldId;
    this.control = new Int32Array(init.control);
    this.layout = computeLayout(init.params);
    if (this.control[this.layout.magic] !== MAGIC || this.control[this.layout.sizeWord] !== init.size) {
      throw new ShmUsageError('ShmCommunicator.connect: the control block does not match the init object');
    }
    const L = this.layout,
      G = this.size;
    this.abortFlag = new AbortFlag(this.control, {
      flag: L.abortFlag,
      rank: L.abortRank,
      reasonLen: L.reasonLen,
      reasonByte: L.reasonByte,
      reasonBytes: REASON_BYTES,
    });
    this.waitOpts = {
      abort: this.abortFlag,
      timeoutMs: init.timeoutMs,
      sliceMs: init.sliceMs,
      observer: `rank ${this.rank}`,
      ...(init.spinMicros === 'adaptive' ? { adaptiveSpin: new AdaptiveSpin() } : { spinMicros: init.spinMicros }),
    };
    if (init.stallMs > 0) this.waitOpts.stall = { afterMs: init.stallMs, warn: (ms) => this.reportStall(ms) };
    this.worldBarrier = new Barrier(this.control, L.barrier, G, this.waitOpts, 'rank');
    this.arena = new Arena(init.memory, this.control, L, init.arenaMaxBytes, this.waitOpts);
    this.registry = new Registry(this.arena);
    this.mailboxes = new Mailboxes(this.control, L, this.arena, this.rank);
    this.descriptors = new CallDescriptors(this.control, L, this.rank, G);
    const kernel = new ReduceKernel(init.memory, L.tableBase + this.rank * TABLE_BYTES);
    this.collectives = new ShmCollectives(
      this.rank,
      G,
      L,
      this.arena,
      kernel,
      loadShmNative(),
      this.registry,
      this.stats,
      {
        begin: (op, n, m, root, redop) => this.descriptors.write(op, n, m, root, redop),
        arrive: (validate) => this.arrive(validate),
      },
    );
    this.exchange = new HandleExchange<BufferHandle>(
      init.worldId,
      this.rank,
      G,
      this.control,
      L.connected,
      this.abortFlag,
      this.waitOpts,
    );
  }

  // ---------------------------------------------------------------- Communicator

  async allreduce(buf: Float32Array, op: ReduceOp = 'sum'): Promise<void> {
    this.allreduceSync(buf, op);
  }

  async reduceScatter(buf: Float32Array, op: ReduceOp = 'sum'): Promise<{ start: number; end: number }> {
    return this.reduceScatterSync(buf, op);
  }

  async allgather(buf: Float32Array): Promise<void> {
    this.allgatherSync(buf);
  }

  async broadcast(buf: Float32Array, root: number): Promise<void> {
    this.broadcastSync(buf, root);
  }

  async barrier(): Promise<void> {
    this.barrierSync();
  }

  async send(buf: Float32Array, dest: number, tag = 0): Promise<void> {
    this.sendSync(buf, dest, tag);
  }

  async recv(buf: Float32Array, source: number, tag = 0): Promise<void> {
    this.recvSync(buf, source, tag);
  }

  takeStats(): CollectiveStats {
    const s = { ...this.stats };
    this.stats.commMs = this.stats.idleMs = this.stats.bytes = 0;
    return s;
  }

  // ---------------------------------------------------------------- synchronous variants

  allreduceSync(buf: Float32Array, op: ReduceOp = 'sum'): void {
    this.guard('allreduce', () => {
      const redop = reduceOpCode(op);
      checkBuffer(buf, 'allreduce');
      this.collectives.reduce(buf, redop, true);
    });
  }

  reduceScatterSync(buf: Float32Array, op: ReduceOp = 'sum'): { start: number; end: number } {
    return this.guard('reduceScatter', () => {
      const redop = reduceOpCode(op);
      checkBuffer(buf, 'reduceScatter');
      this.collectives.reduce(buf, redop, false);
      return ownedSlice(buf.length, this.size, this.rank);
    });
  }

  allgatherSync(buf: Float32Array): void {
    this.guard('allgather', () => {
      checkBuffer(buf, 'allgather');
      const m = this.registry.match(buf);
      if (m) this.collectives.allgatherRegistered(buf, m);
      else this.collectives.allgatherStaged(buf);
    });
  }

  broadcastSync(buf: Float32Array, root: number): void {
    this.guard('broadcast', () => {
      checkBuffer(buf, 'broadcast');
      checkRank(root, this.size, 'broadcast root');
      const m = this.registry.match(buf);
      if (m) this.collectives.broadcastRegistered(buf, m, root);
      else this.collectives.broadcastStaged(buf, root);
    });
  }

  barrierSync(): void {
    this.guard('barrier', () => {
      this.descriptors.write(OP_BARRIER, 0, null, -1, 0);
      this.arrive(true);
    });
  }

  sendSync(buf: Float32Array, dest: number, tag = 0): void {
    this.guard('send', () => {
      checkBuffer(buf, 'send');
      checkRank(dest, this.size, 'send destination');
      checkTag(tag);
      this.stats.idleMs += this.mailboxes.send(buf, dest, tag | 0, this.waitOpts);
      this.stats.bytes += buf.length * 4;
    });
  }

  trySend(buf: Float32Array, dest: number, tag = 0): boolean {
    return this.guard('send', () => {
      checkBuffer(buf, 'send');
      checkRank(dest, this.size, 'send destination');
      checkTag(tag);
      const sent = this.mailboxes.trySend(buf, dest, tag | 0);
      if (sent) this.stats.bytes += buf.length * 4;
      return sent;
    });
  }

  recvSync(buf: Float32Array, source: number, tag = 0): void {
    this.guard('recv', () => {
      checkBuffer(buf, 'recv');
      checkRank(source, this.size, 'recv source');
      checkTag(tag);
      this.stats.idleMs += this.mailboxes.recv(buf, source, tag | 0, this.waitOpts);
      this.stats.bytes += buf.length * 4;
    });
  }

  // ---------------------------------------------------------------- shm extras

  /**
   * Collective: every rank registers its corresponding buffer (same length, same order of calls).
   * Afterwards collectives on `buf` (or any subarray of it) read and write peers' memory directly.
   * `buf` must be SharedArrayBuffer-backed: `comm.alloc(n)` (fastest: SIMD in place), a view on
   * a SharedArrayBuffer, or a view into a shared wasm memory.
   */
  async register(buf: Float32Array): Promise<void> {
    const seq = this.regSeq++;
    const handle = registrationHandle(this.rank, buf, this.arena);
    let handles: BufferHandle[];
    try {
      handles = await this.exchange.exchange(seq, handle);
    } catch (err) {
      if (!(err instanceof PeerFailedError)) this.abortFlag.raise(this.rank, `register() failed: ${errorText(err)}`);
      throw err;
    }
    checkRegistrations(handles);
    this.registry.add(buf, handles);
  }

  /** Forget a registration (local; do it at the same point on every rank). */
  unregister(buf: Float32Array): boolean {
    return this.registry.remove(buf);
  }

  /** True when collectives on `buf` take the zero-copy path. */
  isRegistered(buf: Float32Array): boolean {
    return this.registry.match(buf) !== null;
  }

  /** True when `buf` lives in the world's arena (registered arena buffers get the SIMD in-place path). */
  inArena(buf: Float32Array): boolean {
    return this.arena.owns(buf);
  }

  /** Collective calls of this rank so far by the path their data took (see PathCounts). */
  pathCounts(): PathCounts {
    return { ...this.collectives.paths };
  }

  /**
   * Whether this rank's reductions may take the native kernel (nativeReduce.ts) where it loaded
   * (the default), or only the wasm one: both give the same bits, so ranks may differ. For
   * comparing the two (`npm run bench -- allreduce`). Returns whether the native one will run.
   */
  useNativeReduce(on: boolean): boolean {
    return this.collectives.useNative(on);
  }

  /**
   * The arena as a wasm kernel heap (`useSharedHeap` of src/kernels): a backend built over it keeps
   * every array it allocates — a replica's flat params, grads and state — in the arena, so
   * registering them gives the in-place path. Regions are reserved from the arena (never freed).
   */
  heapSource(): {
    memory: WebAssembly.Memory;
    staticBytes: number;
    reserve(bytes: number): number;
    buffer(): ArrayBufferLike;
  } {
    return {
      memory: this.arena.memory,
      staticBytes: KERNEL_STATIC_BYTES,
      reserve: (bytes) => this.arena.alloc(Math.ceil(bytes / 4)).byteOffset,
      buffer: () => this.arena.current(),
    };
  }

  /** Zeroed floats in the world's shared arena (never freed); register them for the fastest collectives. */
  alloc(length: number): Float32Array {
    return this.arena.alloc(length);
  }

  /** Mutex slot `i` of the world (same lock as `world.mutex(i)`), abort-aware. */
  mutex(i: number): Mutex {
    if (!Number.isInteger(i) || i < 0 || i >= this.layout.mutexes)
      throw new ShmUsageError(
        `mutex: index must be in 0..${this.layout.mutexes - 1} (raise 'mutexes' in createShmWorld options), got ${i}`,
      );
    return new Mutex(this.control, this.layout.mutexBase + i, this.waitOpts);
  }

  /**
   * Mutex slot `i` of the world as a one-word Int32Array over the control block (structured-
   * clonable): `new Mutex(comm.lockWord(i))` is the same lock as `comm.mutex(i)`, and abort-aware.
   */
  lockWord(i = 0): Int32Array {
    if (!Number.isInteger(i) || i < 0 || i >= this.layout.mutexes)
      throw new ShmUsageError(
        `lockWord: index must be in 0..${this.layout.mutexes - 1} (raise 'mutexes' in createShmWorld options), got ${i}`,
      );
    return new Int32Array(this.control.buffer, (this.layout.mutexBase + i) * 4, 1);
  }

  /** The job's abort word, for `waitUntil(…, comm.abortSignal())` and other custom waits. */
  abortSignal(): AbortFlag {
    return this.abortFlag;
  }

  /** Wait options (abort word, timeout, spin) for primitives a caller builds on this world. */
  waitOptions(): WaitOptions {
    return { ...this.waitOpts };
  }

  /** Abort the job: every rank's pending and future calls throw PeerFailedError naming this rank. */
  abort(reason = 'aborted'): void {
    this.abortFlag.raise(this.rank, reason);
  }

  get aborted(): boolean {
    return this.abortFlag.aborted;
  }

  /** Release the setup channel (lets the worker exit); the shared memory stays with the world. */
  close(): void {
    this.exchange.close();
  }

  // ---------------------------------------------------------------- internals

  private guard<T>(what: string, fn: () => T): T {
    const t0 = performance.now();
    try {
      this.abortFlag.check(this.waitOpts.observer);
      return fn();
    } catch (err) {
      if (!(err instanceof PeerFailedError))
        this.abortFlag.raise(this.rank, `${what} failed on rank ${this.rank}: ${errorText(err)}`);
      throw err;
    } finally {
      this.stats.commMs += performance.now() - t0;
    }
  }

  /** The stall inspector's report of a long wait: who has not reached the barrier, where everyone is. */
  private reportStall(waitedMs: number): void {
    const others = Array.from({ length: this.size }, (_, q) => ({ rank: q, ...this.descriptors.position(q) })).filter(
      (p) => p.rank !== this.rank,
    );
    reportStall({
      rank: this.rank,
      waitingIn: this.descriptors.position(this.rank).call,
      seconds: waitedMs / 1000,
      missing: this.worldBarrier.missing().filter((q) => q !== this.rank),
      others,
    });
  }

  /** Meet every rank; on the first barrier of a call, check all ranks made the same call. */
  private arrive(validate: boolean): void {
    this.stats.idleMs += this.worldBarrier.wait(this.rank, this.waitOpts);
    if (validate) this.descriptors.check();
  }
}
