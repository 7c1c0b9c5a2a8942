/**
 * The shared-memory Communicator of one rank (a worker thread).
 *
 * Data path: shared memory + Atomics only. Every collective starts by writing a call descriptor
 * and meeting the others at a barrier, where each rank checks that all called the same thing
 * (operation, length, root, buffer kind) — a mismatch is an error naming every rank's call, not
 * a silent corruption. Then:
 *
 * - Registered buffers (`await comm.register(buf)` on every rank, same order, same length): zero
 *   copy. allreduce: each rank reduces its owned 1/G slice reading every rank's buffer directly
 *   and writes the result into every rank's slice; a second barrier ends the call. Buffers from
 *   the arena (`comm.alloc`) are reduced in place by the SIMD kernel; other SharedArrayBuffers
 *   go through this rank's arena scratch in ≤ 64 KiB chunks (copy in, SIMD reduce, copy out).
 * - Other buffers: through per-rank staging halves in the arena, used alternately so one
 *   barrier per round keeps a rank from overwriting what a peer still reads.
 *
 * Reductions add in rank order in float32 (then divide by G for 'mean'), so every rank gets
 * bit-identical results, equal to a serial float32 sum over ranks 0..G-1.
 *
 * Calls are synchronous under the hood (Atomics.wait) and return resolved promises; the `*Sync`
 * variants skip the promise. Any error inside a call aborts the job so no peer waits forever.
 */
import { ownedSlice, type CollectiveStats, type Communicator, type ReduceOp } from '../communicator.ts';
import { AbortFlag } from './abort.ts';
import { Arena } from './arena.ts';
import { Barrier } from './barrier.ts';
import { CollectiveMismatchError, PeerFailedError, ShmUsageError } from './errors.ts';
import { HandleExchange } from './exchange.ts';
import { computeLayout, DESC_WORDS, LAYOUT_VERSION, MAGIC, REASON_BYTES, SCRATCH_BYTES, TABLE_BYTES, type Layout } from './layout.ts';
import { Mailboxes } from './mailbox.ts';
import { Mutex } from './mutex.ts';
import { ReduceKernel } from './reduceKernel.ts';
import { Registry, type BufferHandle, type Match } from './registry.ts';
import type { WaitOptions } from './wait.ts';
import type { ShmInit } from './world.ts';

const OP_BARRIER = 1, OP_ALLREDUCE = 2, OP_REDUCE_SCATTER = 3, OP_ALLGATHER = 4, OP_BROADCAST = 5;
const OP_NAMES = ['?', 'barrier', 'allreduce', 'reduceScatter', 'allgather', 'broadcast'];
const REDOPS: ReduceOp[] = ['sum', 'mean'];
/** unregistered allreduce up to this many floats: every rank reduces the whole buffer (one barrier) */
const SMALL_FLOATS = 4096;
/** copy-through chunk for registered buffers outside the arena */
const MAX_CHUNK_FLOATS = 16384;

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
  private readonly kernel: ReduceKernel;
  private readonly registry: Registry;
  private readonly exchange: HandleExchange<BufferHandle>;
  private readonly mailboxes: Mailboxes;

  /** staging: [half][rank] views and addresses, halfFloats each */
  private readonly halfFloats: number;
  private readonly stageViews: Float32Array[][];
  private readonly stageAddrs: number[][];
  /** this rank's scratch: G copy-through slots of chunkFloats, slot 0 doubling as result buffer */
  private readonly chunkFloats: number;
  private readonly scratchAddr: number;
  private readonly scratchFloats: number;
  private readonly scratchView: Float32Array;
  private readonly slotViews: Float32Array[];
  private readonly slotAddrs: number[];
  private readonly addrTmp: number[];

  private opSeq = 0;
  private stageSeq = 0;
  private regSeq = 0;
  private commMs = 0;
  private idleMs = 0;
  private bytes = 0;

  /** Connect worker `init.rank` to its world (call once per rank, in that rank's thread). */
  static async connect(init: ShmInit): Promise<ShmCommunicator> {
    return new ShmCommunicator(init);
  }

  private constructor(init: ShmInit) {
    if (!init || init.kind !== 'paratrain.shm') throw new ShmUsageError('ShmCommunicator.connect: not an init object from world.rankInit(rank)');
    if (init.version !== LAYOUT_VERSION) throw new ShmUsageError(`ShmCommunicator.connect: init version ${init.version}, this code speaks ${LAYOUT_VERSION}`);
    this.rank = init.rank;
    this.size = init.size;
    this.worldId = init.worldId;
    this.control = new Int32Array(init.control);
    this.layout = computeLayout(init.params);
    if (this.control[this.layout.magic] !== MAGIC || this.control[this.layout.sizeWord] !== init.size) {
      throw new ShmUsageError('ShmCommunicator.connect: the control block does not match the init object');
    }
    const L = this.layout, G = this.size;
    this.abortFlag = new AbortFlag(this.control, {
      flag: L.abortFlag, rank: L.abortRank, reasonLen: L.reasonLen, reasonByte: L.reasonByte, reasonBytes: REASON_BYTES,
    });
    this.waitOpts = {
      abort: this.abortFlag, timeoutMs: init.timeoutMs, spinMicros: init.spinMicros, sliceMs: init.sliceMs, observer: `rank ${this.rank}`,
    };
    this.worldBarrier = new Barrier(this.control, L.barrier, G, this.waitOpts, 'rank');
    this.arena = new Arena(init.memory, this.control, L, init.arenaMaxBytes, this.waitOpts);
    this.kernel = new ReduceKernel(init.memory, L.tableBase + this.rank * TABLE_BYTES);
    this.registry = new Registry(this.arena);
    this.mailboxes = new Mailboxes(this.control, L, this.arena, this.rank);

    this.halfFloats = L.stagingBytes / 2 / 4;
    this.stageViews = [0, 1].map((h) => Array.from({ length: G }, (_, q) => this.arena.f32(this.stageAddr(q, h), this.halfFloats)));
    this.stageAddrs = [0, 1].map((h) => Array.from({ length: G }, (_, q) => this.stageAddr(q, h)));
    this.scratchAddr = L.scratchBase + this.rank * SCRATCH_BYTES;
    this.scratchFloats = SCRATCH_BYTES / 4;
    this.scratchView = this.arena.f32(this.scratchAddr, this.scratchFloats);
    this.chunkFloats = Math.min(MAX_CHUNK_FLOATS, Math.floor(this.scratchFloats / G / 16) * 16);
    this.slotAddrs = Array.from({ length: G }, (_, q) => this.scratchAddr + q * this.chunkFloats * 4);
    this.slotViews = this.slotAddrs.map((a) => this.arena.f32(a, this.chunkFloats));
    this.addrTmp = new Array<number>(G).fill(0);

    this.exchange = new HandleExchange<BufferHandle>(init.worldId, this.rank, G, this.control, L.connected, this.abortFlag, this.waitOpts);
  }

  private stageAddr(q: number, h: number): number {
    return this.layout.stagingBase + q * this.layout.stagingBytes + h * (this.layout.stagingBytes / 2);
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
    const s = { commMs: this.commMs, idleMs: this.idleMs, bytes: this.bytes };
    this.commMs = this.idleMs = this.bytes = 0;
    return s;
  }

  // ---------------------------------------------------------------- synchronous variants

  allreduceSync(buf: Float32Array, op: ReduceOp = 'sum'): void {
    this.guard('allreduce', () => {
      const redop = this.checkOp(op);
      this.checkBuf(buf, 'allreduce');
      this.reduce(buf, redop, true);
    });
  }

  reduceScatterSync(buf: Float32Array, op: ReduceOp = 'sum'): { start: number; end: number } {
    return this.guard('reduceScatter', () => {
      const redop = this.checkOp(op);
      this.checkBuf(buf, 'reduceScatter');
      this.reduce(buf, redop, false);
      return ownedSlice(buf.length, this.size, this.rank);
    });
  }

  allgatherSync(buf: Float32Array): void {
    this.guard('allgather', () => {
      this.checkBuf(buf, 'allgather');
      const m = this.registry.match(buf);
      if (m) this.allgatherRegistered(buf, m);
      else this.allgatherStaged(buf);
    });
  }

  broadcastSync(buf: Float32Array, root: number): void {
    this.guard('broadcast', () => {
      this.checkBuf(buf, 'broadcast');
      this.checkRank(root, 'broadcast root');
      const m = this.registry.match(buf);
      if (m) this.broadcastRegistered(buf, m, root);
      else this.broadcastStaged(buf, root);
    });
  }

  barrierSync(): void {
    this.guard('barrier', () => {
      this.begin(OP_BARRIER, 0, null, -1, 0);
      this.arrive(true);
    });
  }

  sendSync(buf: Float32Array, dest: number, tag = 0): void {
    this.guard('send', () => {
      this.checkBuf(buf, 'send');
      this.checkRank(dest, 'send destination');
      this.checkTag(tag);
      this.idleMs += this.mailboxes.send(buf, dest, tag | 0, this.waitOpts);
      this.bytes += buf.length * 4;
    });
  }

  recvSync(buf: Float32Array, source: number, tag = 0): void {
    this.guard('recv', () => {
      this.checkBuf(buf, 'recv');
      this.checkRank(source, 'recv source');
      this.checkTag(tag);
      this.idleMs += this.mailboxes.recv(buf, source, tag | 0, this.waitOpts);
      this.bytes += buf.length * 4;
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
    let handle: BufferHandle;
    if (!(buf instanceof Float32Array)) {
      handle = { sab: null, byteOffset: 0, length: 0, arena: false, error: `rank ${this.rank} passed ${describeValue(buf)} to register(), not a Float32Array` };
    } else if (!(buf.buffer instanceof SharedArrayBuffer)) {
      handle = {
        sab: null, byteOffset: 0, length: buf.length, arena: false,
        error: `rank ${this.rank}'s buffer (${buf.length} floats) is backed by an ArrayBuffer, not a SharedArrayBuffer, so peers cannot read it; ` +
          'allocate it with comm.alloc(n), new Float32Array(new SharedArrayBuffer(n * 4)), or in a shared wasm memory',
      };
    } else {
      handle = { sab: buf.buffer, byteOffset: buf.byteOffset, length: buf.length, arena: this.arena.owns(buf) };
    }
    let handles: BufferHandle[];
    try {
      handles = await this.exchange.exchange(seq, handle);
    } catch (err) {
      if (!(err instanceof PeerFailedError)) this.abortFlag.raise(this.rank, `register() failed: ${errorText(err)}`);
      throw err;
    }
    const errors = handles.filter((h) => h.error).map((h) => h.error);
    if (errors.length) throw new ShmUsageError(`register: ${errors.join('; ')}`);
    const lengths = handles.map((h) => h.length);
    if (lengths.some((l) => l !== lengths[0])) {
      throw new ShmUsageError(`register: ranks registered buffers of different lengths (${lengths.map((l, r) => `rank ${r}: ${l}`).join(', ')}); register corresponding buffers in the same order on every rank`);
    }
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

  /** Zeroed floats in the world's shared arena (never freed); register them for the fastest collectives. */
  alloc(length: number): Float32Array {
    return this.arena.alloc(length);
  }

  /** Mutex slot `i` of the world (same lock as `world.mutex(i)`), abort-aware. */
  mutex(i: number): Mutex {
    if (!Number.isInteger(i) || i < 0 || i >= this.layout.mutexes) throw new ShmUsageError(`mutex: index must be in 0..${this.layout.mutexes - 1} (raise 'mutexes' in createShmWorld options), got ${i}`);
    return new Mutex(this.control, this.layout.mutexBase + i, this.waitOpts);
  }

  /**
   * Mutex slot `i` of the world as a one-word Int32Array over the control block (structured-
   * clonable): `new Mutex(comm.lockWord(i))` is the same lock as `comm.mutex(i)`, and abort-aware.
   */
  lockWord(i = 0): Int32Array {
    if (!Number.isInteger(i) || i < 0 || i >= this.layout.mutexes) throw new ShmUsageError(`lockWord: index must be in 0..${this.layout.mutexes - 1} (raise 'mutexes' in createShmWorld options), got ${i}`);
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
      if (!(err instanceof PeerFailedError)) this.abortFlag.raise(this.rank, `${what} failed on rank ${this.rank}: ${errorText(err)}`);
      throw err;
    } finally {
      this.commMs += performance.now() - t0;
    }
  }

  private checkOp(op: ReduceOp): number {
    const i = REDOPS.indexOf(op);
    if (i < 0) throw new ShmUsageError(`reduce op must be one of ${REDOPS.join(', ')}, got ${String(op)}`);
    return i;
  }

  private checkBuf(buf: Float32Array, what: string): void {
    if (!(buf instanceof Float32Array)) throw new ShmUsageError(`${what}: expected a Float32Array, got ${describeValue(buf)}`);
  }

  private checkRank(r: number, what: string): void {
    if (!Number.isInteger(r) || r < 0 || r >= this.size) throw new ShmUsageError(`${what} must be a rank in 0..${this.size - 1}, got ${r}`);
  }

  private checkTag(tag: number): void {
    if (!Number.isInteger(tag) || tag < -(2 ** 31) || tag >= 2 ** 31) throw new ShmUsageError(`tag must be a 32-bit integer, got ${tag}`);
  }

  private nextHalf(): number {
    return this.stageSeq++ & 1;
  }

  /** Write this rank's descriptor of the call about to happen (checked at the first barrier). */
  private begin(op: number, n: number, m: Match | null, root: number, redop: number): void {
    const seq = this.opSeq++;
    const base = this.layout.descBase + ((seq & 1) * this.size + this.rank) * DESC_WORDS;
    const c = this.control;
    Atomics.store(c, base, seq | 0);
    Atomics.store(c, base + 1, op);
    Atomics.store(c, base + 2, n);
    Atomics.store(c, base + 3, m ? 1 : 0);
    Atomics.store(c, base + 4, m ? m.reg.id : -1);
    Atomics.store(c, base + 5, m ? m.offset : -1);
    Atomics.store(c, base + 6, root);
    Atomics.store(c, base + 7, redop);
  }

  /** Meet every rank; on the first barrier of a call, check all ranks made the same call. */
  private arrive(validate: boolean): void {
    this.idleMs += this.worldBarrier.wait(this.rank, this.waitOpts);
    if (validate) this.validate();
  }

  private validate(): void {
    const seq = this.opSeq - 1;
    const c = this.control, G = this.size;
    const at = (q: number) => this.layout.descBase + ((seq & 1) * G + q) * DESC_WORDS;
    const mine = at(this.rank);
    let ok = true;
    for (let q = 0; q < G && ok; q++) {
      const b = at(q);
      for (let k = 0; k < DESC_WORDS; k++) {
        if (Atomics.load(c, b + k) !== Atomics.load(c, mine + k)) {
          ok = false;
          break;
        }
      }
    }
    if (ok) return;
    const calls = Array.from({ length: G }, (_, q) => {
      const b = at(q);
      const w = (k: number) => Atomics.load(c, b + k);
      const op = OP_NAMES[w(1)] ?? `op ${w(1)}`;
      const args: string[] = [];
      if (w(1) !== OP_BARRIER) args.push(`length ${w(2)}`, w(3) ? `registered buffer #${w(4)}${w(5) ? ` at +${w(5)}` : ''}` : 'unregistered buffer');
      if (w(1) === OP_BROADCAST) args.push(`root ${w(6)}`);
      if (w(1) === OP_ALLREDUCE || w(1) === OP_REDUCE_SCATTER) args.push(REDOPS[w(7)] ?? `op ${w(7)}`);
      return `rank ${q}: call #${w(0)} ${op}(${args.join(', ')})`;
    });
    throw new CollectiveMismatchError(
      `ranks made different collective calls: ${calls.join('; ')}. Every rank must call the same collectives in the same order with the same lengths (and register the same buffers)`,
    );
  }

  /** allreduce (all = true) or reduceScatter (all = false). */
  private reduce(buf: Float32Array, redop: number, all: boolean): void {
    const div = redop === 1 ? this.size : 0;
    const op = all ? OP_ALLREDUCE : OP_REDUCE_SCATTER;
    const m = this.registry.match(buf);
    if (!m) {
      this.reduceStaged(buf, div, all, op, redop);
      return;
    }
    const n = buf.length;
    this.begin(op, n, m, -1, redop);
    this.arrive(true);
    const { start, end } = ownedSlice(n, this.size, this.rank);
    this.reduceRegistered(m, start, end, div, all);
    this.arrive(false);
  }

  /** Reduce elements [start, end) of a registration match into all ranks' buffers (or only this one's). */
  private reduceRegistered(m: Match, start: number, end: number, div: number, all: boolean): void {
    const len = end - start;
    if (len <= 0) return;
    const G = this.size, { reg, offset } = m;
    if (reg.addrs) {
      const srcs = this.addrTmp;
      for (let q = 0; q < G; q++) srcs[q] = reg.addrs[q]! + (offset + start) * 4;
      this.kernel.reduce(srcs, all ? srcs : [srcs[this.rank]!], len, div);
      this.bytes += len * 4 * (G - 1 + (all ? G : 1));
      return;
    }
    const CH = this.chunkFloats, views = reg.views, slots = this.slotViews, out = [this.slotAddrs[0]!];
    for (let c0 = start; c0 < end; c0 += CH) {
      const c1 = Math.min(end, c0 + CH), w = c1 - c0;
      for (let q = 0; q < G; q++) slots[q]!.set(views[q]!.subarray(offset + c0, offset + c1));
      this.kernel.reduce(this.slotAddrs, out, w, div);
      const res = w === CH ? slots[0]! : slots[0]!.subarray(0, w);
      if (all) for (let q = 0; q < G; q++) views[q]!.set(res, offset + c0);
      else views[this.rank]!.set(res, offset + c0);
    }
    this.bytes += len * 4 * (G - 1 + (all ? G : 1));
  }

  private reduceStaged(buf: Float32Array, div: number, all: boolean, op: number, redop: number): void {
    const n = buf.length, G = this.size, H = this.halfFloats, me = this.rank;
    this.begin(op, n, null, -1, redop);
    if (all && n <= SMALL_FLOATS && n <= H && n <= this.scratchFloats) {
      // small: everyone reduces everything, one barrier
      const h = this.nextHalf();
      if (n > 0) this.stageViews[h]![me]!.set(buf);
      this.arrive(true);
      if (n > 0) {
        this.kernel.reduce(this.stageAddrs[h]!, [this.scratchAddr], n, div);
        buf.set(this.scratchView.subarray(0, n));
        this.bytes += n * 4 * (G + 2);
      }
      return;
    }
    // rounds: in round t, owner q's piece [s_q + tP, …) sits at q·P in every rank's staging half
    const P = Math.floor(H / G);
    const slices = Array.from({ length: G }, (_, q) => ownedSlice(n, G, q));
    const rounds = Math.max(1, Math.ceil(Math.ceil(n / G) / P));
    const srcs = this.addrTmp;
    for (let t = 0; t < rounds; t++) {
      const h = this.nextHalf(), mine = this.stageViews[h]![me]!;
      for (let q = 0; q < G; q++) {
        const a = slices[q]!.start + t * P, b = Math.min(slices[q]!.end, a + P);
        if (b > a) mine.set(buf.subarray(a, b), q * P);
      }
      this.arrive(t === 0);
      const a = slices[me]!.start + t * P, L = Math.min(slices[me]!.end, a + P) - a;
      if (L > 0) {
        for (let q = 0; q < G; q++) srcs[q] = this.stageAddrs[h]![q]! + me * P * 4;
        this.kernel.reduce(srcs, [srcs[me]!], L, div);
      }
      if (all) {
        this.arrive(false);
        for (let q = 0; q < G; q++) {
          const aq = slices[q]!.start + t * P, Lq = Math.min(slices[q]!.end, aq + P) - aq;
          if (Lq > 0) buf.set(this.stageViews[h]![q]!.subarray(q * P, q * P + Lq), aq);
        }
      } else if (L > 0) {
        buf.set(mine.subarray(me * P, me * P + L), a);
      }
    }
    const mineLen = slices[me]!.end - slices[me]!.start;
    this.bytes += n * 4 + mineLen * 4 * (G + 1) + (all ? n * 4 : mineLen * 4);
  }

  private allgatherRegistered(buf: Float32Array, m: Match): void {
    const n = buf.length, G = this.size;
    this.begin(OP_ALLGATHER, n, m, -1, 0);
    this.arrive(true);
    for (let q = 0; q < G; q++) {
      if (q === this.rank) continue;
      const { start, end } = ownedSlice(n, G, q);
      if (end > start) buf.set(m.reg.views[q]!.subarray(m.offset + start, m.offset + end), start);
      this.bytes += (end - start) * 8;
    }
    this.arrive(false);
  }

  private allgatherStaged(buf: Float32Array): void {
    const n = buf.length, G = this.size, H = this.halfFloats, me = this.rank;
    this.begin(OP_ALLGATHER, n, null, -1, 0);
    const slices = Array.from({ length: G }, (_, q) => ownedSlice(n, G, q));
    const rounds = Math.max(1, Math.ceil(Math.ceil(n / G) / H));
    for (let t = 0; t < rounds; t++) {
      const h = this.nextHalf();
      const a = slices[me]!.start + t * H, b = Math.min(slices[me]!.end, a + H);
      if (b > a) this.stageViews[h]![me]!.set(buf.subarray(a, b));
      this.arrive(t === 0);
      for (let q = 0; q < G; q++) {
        if (q === me) continue;
        const aq = slices[q]!.start + t * H, Lq = Math.min(slices[q]!.end, aq + H) - aq;
        if (Lq > 0) buf.set(this.stageViews[h]![q]!.subarray(0, Lq), aq);
      }
    }
    this.bytes += n * 8;
  }

  private broadcastRegistered(buf: Float32Array, m: Match, root: number): void {
    const n = buf.length;
    this.begin(OP_BROADCAST, n, m, root, 0);
    this.arrive(true);
    if (this.rank !== root && n > 0) {
      buf.set(m.reg.views[root]!.subarray(m.offset, m.offset + n));
      this.bytes += n * 8;
    }
    this.arrive(false);
  }

  private broadcastStaged(buf: Float32Array, root: number): void {
    const n = buf.length, H = this.halfFloats;
    this.begin(OP_BROADCAST, n, null, root, 0);
    const rounds = Math.max(1, Math.ceil(n / H));
    for (let t = 0; t < rounds; t++) {
      const h = this.nextHalf();
      const a = t * H, b = Math.min(n, a + H);
      if (this.rank === root && b > a) this.stageViews[h]![root]!.set(buf.subarray(a, b));
      this.arrive(t === 0);
      if (this.rank !== root && b > a) buf.set(this.stageViews[h]![root]!.subarray(0, b - a), a);
    }
    this.bytes += n * 8;
  }
}

function errorText(err: unknown): string {
  return err instanceof Error ? `${err.name}: ${err.message}` : String(err);
}

function describeValue(v: unknown): string {
  if (v === null) return 'null';
  if (typeof v === 'object') return (v as object).constructor?.name ?? 'an object';
  return typeof v;
}
