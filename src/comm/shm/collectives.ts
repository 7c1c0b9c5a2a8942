/**
 * How the shm collectives move data, once every rank has entered the call (see shmCommunicator.ts):
 *
 * - Registered buffers: zero copy. A reduction reduces this rank's owned 1/G slice reading every
 *   rank's buffer directly and writes the result into every rank's slice (reduceScatter: its
 *   own). Where the native reduction is built (nativeReduce.ts) it does this on any registered
 *   buffers, wherever they live, when the rank's slice has NATIVE_MIN_FLOATS or more. Otherwise
 *   the wasm SIMD kernel does: buffers from the arena in place, other SharedArrayBuffers through
 *   this rank's scratch in ≤ 64 KiB chunks (copy in, SIMD reduce, copy out).
 * - Other buffers: through per-rank staging halves in the arena, used alternately so one barrier
 *   per round keeps a rank from overwriting what a peer still reads.
 *
 * Reductions add in rank order in float32 (then divide by G for 'mean'), so every rank gets
 * bit-identical results, equal to a serial float32 sum over ranks 0..G-1.
 */
import { ownedSlice } from '../communicator.ts';
import type { Arena } from './arena.ts';
import { OP_ALLGATHER, OP_ALLREDUCE, OP_BROADCAST, OP_REDUCE_SCATTER } from './callDescriptor.ts';
import { SCRATCH_BYTES, type Layout } from './layout.ts';
import type { ReduceKernel } from './reduceKernel.ts';
import type { ShmNativeAddon } from './nativeReduce.ts';
import type { Match, Registry } from './registry.ts';

/** unregistered allreduce up to this many floats: every rank reduces the whole buffer (one barrier) */
const SMALL_FLOATS = 4096;
/** copy-through chunk for registered buffers outside the arena */
const MAX_CHUNK_FLOATS = 16384;
/**
 * A rank's slice of a registered reduction from this many floats takes the native kernel where it
 * is built: its call costs about 1.3 µs, and in cache the wasm kernel is as fast up to about 16 Ki
 * floats (a scratch timing on a Zen 4: 3.0 against 3.2 µs there, 11.5 against 9.1 at 64 Ki).
 */
export const NATIVE_MIN_FLOATS = 32768;

/**
 * Collective calls by the path their data took (cumulative per rank): `inPlace` on registered
 * arena buffers (reductions in place, allgather/broadcast straight from peers' buffers),
 * `copyThrough` reductions of registered buffers outside the arena through scratch (the wasm
 * kernel), `direct` the other collectives on registered buffers outside the arena, which read
 * peers' buffers straight (allgather, broadcast, and reductions by the native kernel), `staged`
 * unregistered ones. `native` counts the reductions the native kernel did, of either kind.
 */
export interface PathCounts {
  inPlace: number;
  copyThrough: number;
  direct: number;
  staged: number;
  native: number;
}

/** How a collective meets the other ranks: its descriptor, then barriers (the first one checks the descriptors). */
export interface CallMeeting {
  begin(op: number, n: number, m: Match | null, root: number, redop: number): void;
  arrive(validate: boolean): void;
}

export class ShmCollectives {
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
  private stageSeq = 0;
  /** the native reduction while it is in use (see useNative) */
  private native: ShmNativeAddon | null;
  readonly paths: PathCounts = { inPlace: 0, copyThrough: 0, direct: 0, staged: 0, native: 0 };

  constructor(
    private readonly rank: number,
    private readonly size: number,
    layout: Layout,
    arena: Arena,
    private readonly kernel: ReduceKernel,
    /** the native reduction, or null (not built, or PARATRAIN_SHM_NATIVE=0) */
    private readonly nativeAddon: ShmNativeAddon | null,
    private readonly registry: Registry,
    private readonly stats: { bytes: number },
    private readonly call: CallMeeting,
  ) {
    const L = layout,
      G = size;
    const stageAddr = (q: number, h: number) => L.stagingBase + q * L.stagingBytes + h * (L.stagingBytes / 2);
    this.halfFloats = L.stagingBytes / 2 / 4;
    this.stageViews = [0, 1].map((h) =>
      Array.from({ length: G }, (_, q) => arena.f32(stageAddr(q, h), this.halfFloats)),
    );
    this.stageAddrs = [0, 1].map((h) => Array.from({ length: G }, (_, q) => stageAddr(q, h)));
    this.scratchAddr = L.scratchBase + rank * SCRATCH_BYTES;
    this.scratchFloats = SCRATCH_BYTES / 4;
    this.scratchView = arena.f32(this.scratchAddr, this.scratchFloats);
    this.chunkFloats = Math.min(MAX_CHUNK_FLOATS, Math.floor(this.scratchFloats / G / 16) * 16);
    this.slotAddrs = Array.from({ length: G }, (_, q) => this.scratchAddr + q * this.chunkFloats * 4);
    this.slotViews = this.slotAddrs.map((a) => arena.f32(a, this.chunkFloats));
    this.addrTmp = new Array<number>(G).fill(0);
    this.native = nativeAddon;
  }

  /** Whether reductions may take the native kernel (where it loaded), to compare the two; the answer: whether they will. */
  useNative(on: boolean): boolean {
    this.native = on ? this.nativeAddon : null;
    return this.native !== null;
  }

  private countRegistered(m: Match): void {
    if (m.reg.addrs) this.paths.inPlace++;
    else this.paths.direct++;
  }

  private nextHalf(): number {
    return this.stageSeq++ & 1;
  }

  /** allreduce (all = true) or reduceScatter (all = false). */
  reduce(buf: Float32Array, redop: number, all: boolean): void {
    const div = redop === 1 ? this.size : 0;
    const op = all ? OP_ALLREDUCE : OP_REDUCE_SCATTER;
    const m = this.registry.match(buf);
    if (!m) {
      this.paths.staged++;
      this.reduceStaged(buf, div, all, op, redop);
      return;
    }
    const n = buf.length,
      { start, end } = ownedSlice(n, this.size, this.rank);
    const native = this.native !== null && end - start >= NATIVE_MIN_FLOATS;
    if (native) this.paths.native++;
    if (m.reg.addrs) this.paths.inPlace++;
    else if (native) this.paths.direct++;
    else this.paths.copyThrough++;
    this.call.begin(op, n, m, -1, redop);
    this.call.arrive(true);
    this.reduceRegistered(m, start, end, div, all, native);
    this.call.arrive(false);
  }

  /** Reduce elements [start, end) of a registration match into all ranks' buffers (or only this one's). */
  private reduceRegistered(m: Match, start: number, end: number, div: number, all: boolean, native: boolean): void {
    const len = end - start;
    if (len <= 0) return;
    const G = this.size,
      { reg, offset } = m;
    if (native) {
      const views = reg.views;
      this.native!.reduce(views, all ? views : [views[this.rank]!], offset + start, len, div);
      this.stats.bytes += len * 4 * (G - 1 + (all ? G : 1));
      return;
    }
    if (reg.addrs) {
      const srcs = this.addrTmp;
      for (let q = 0; q < G; q++) srcs[q] = reg.addrs[q]! + (offset + start) * 4;
      this.kernel.reduce(srcs, all ? srcs : [srcs[this.rank]!], len, div);
      this.stats.bytes += len * 4 * (G - 1 + (all ? G : 1));
      return;
    }
    const CH = this.chunkFloats,
      views = reg.views,
      slots = this.slotViews,
      out = [this.slotAddrs[0]!];
    for (let c0 = start; c0 < end; c0 += CH) {
      const c1 = Math.min(end, c0 + CH),
        w = c1 - c0;
      for (let q = 0; q < G; q++) slots[q]!.set(views[q]!.subarray(offset + c0, offset + c1));
      this.kernel.reduce(this.slotAddrs, out, w, div);
      const res = w === CH ? slots[0]! : slots[0]!.subarray(0, w);
      if (all) for (let q = 0; q < G; q++) views[q]!.set(res, offset + c0);
      else views[this.rank]!.set(res, offset + c0);
    }
    this.stats.bytes += len * 4 * (G - 1 + (all ? G : 1));
  }

  private reduceStaged(buf: Float32Array, div: number, all: boolean, op: number, redop: number): void {
    const n = buf.length,
      G = this.size,
      H = this.halfFloats,
      me = this.rank;
    this.call.begin(op, n, null, -1, redop);
    if (all && n <= SMALL_FLOATS && n <= H && n <= this.scratchFloats) {
      // small: everyone reduces everything, one barrier
      const h = this.nextHalf();
      if (n > 0) this.stageViews[h]![me]!.set(buf);
      this.call.arrive(true);
      if (n > 0) {
        this.kernel.reduce(this.stageAddrs[h]!, [this.scratchAddr], n, div);
        buf.set(this.scratchView.subarray(0, n));
        this.stats.bytes += n * 4 * (G + 2);
      }
      return;
    }
    // rounds: in round t, owner q's piece [s_q + tP, …) sits at q·P in every rank's staging half
    const P = Math.floor(H / G);
    const slices = Array.from({ length: G }, (_, q) => ownedSlice(n, G, q));
    const rounds = Math.max(1, Math.ceil(Math.ceil(n / G) / P));
    const srcs = this.addrTmp;
    for (let t = 0; t < rounds; t++) {
      const h = this.nextHalf(),
        mine = this.stageViews[h]![me]!;
      for (let q = 0; q < G; q++) {
        const a = slices[q]!.start + t * P,
          b = Math.min(slices[q]!.end, a + P);
        if (b > a) mine.set(buf.subarray(a, b), q * P);
      }
      this.call.arrive(t === 0);
      const a = slices[me]!.start + t * P,
        L = Math.min(slices[me]!.end, a + P) - a;
      if (L > 0) {
        for (let q = 0; q < G; q++) srcs[q] = this.stageAddrs[h]![q]! + me * P * 4;
        this.kernel.reduce(srcs, [srcs[me]!], L, div);
      }
      if (all) {
        this.call.arrive(false);
        for (let q = 0; q < G; q++) {
          const aq = slices[q]!.start + t * P,
            Lq = Math.min(slices[q]!.end, aq + P) - aq;
          if (Lq > 0) buf.set(this.stageViews[h]![q]!.subarray(q * P, q * P + Lq), aq);
        }
      } else if (L > 0) {
        buf.set(mine.subarray(me * P, me * P + L), a);
      }
    }
    const mineLen = slices[me]!.end - slices[me]!.start;
    this.stats.bytes += n * 4 + mineLen * 4 * (G + 1) + (all ? n * 4 : mineLen * 4);
  }

  allgatherRegistered(buf: Float32Array, m: Match): void {
    const n = buf.length,
      G = this.size;
    this.countRegistered(m);
    this.call.begin(OP_ALLGATHER, n, m, -1, 0);
    this.call.arrive(true);
    for (let q = 0; q < G; q++) {
      if (q === this.rank) continue;
      const { start, end } = ownedSlice(n, G, q);
      if (end > start) buf.set(m.reg.views[q]!.subarray(m.offset + start, m.offset + end), start);
      this.stats.bytes += (end - start) * 8;
    }
    this.call.arrive(false);
  }

  allgatherStaged(buf: Float32Array): void {
    const n = buf.length,
      G = this.size,
      H = this.halfFloats,
      me = this.rank;
    this.paths.staged++;
    this.call.begin(OP_ALLGATHER, n, null, -1, 0);
    const slices = Array.from({ length: G }, (_, q) => ownedSlice(n, G, q));
    const rounds = Math.max(1, Math.ceil(Math.ceil(n / G) / H));
    for (let t = 0; t < rounds; t++) {
      const h = this.nextHalf();
      const a = slices[me]!.start + t * H,
        b = Math.min(slices[me]!.end, a + H);
      if (b > a) this.stageViews[h]![me]!.set(buf.subarray(a, b));
      this.call.arrive(t === 0);
      for (let q = 0; q < G; q++) {
        if (q === me) continue;
        const aq = slices[q]!.start + t * H,
          Lq = Math.min(slices[q]!.end, aq + H) - aq;
        if (Lq > 0) buf.set(this.stageViews[h]![q]!.subarray(0, Lq), aq);
      }
    }
    this.stats.bytes += n * 8;
  }

  broadcastRegistered(buf: Float32Array, m: Match, root: number): void {
    const n = buf.length;
    this.countRegistered(m);
    this.call.begin(OP_BROADCAST, n, m, root, 0);
    this.call.arrive(true);
    if (this.rank !== root && n > 0) {
      buf.set(m.reg.views[root]!.subarray(m.offset, m.offset + n));
      this.stats.bytes += n * 8;
    }
    this.call.arrive(false);
  }

  broadcastStaged(buf: Float32Array, root: number): void {
    const n = buf.length,
      H = this.halfFloats;
    this.paths.staged++;
    this.call.begin(OP_BROADCAST, n, null, root, 0);
    const rounds = Math.max(1, Math.ceil(n / H));
    for (let t = 0; t < rounds; t++) {
      const h = this.nextHalf();
      const a = t * H,
        b = Math.min(n, a + H);
      if (this.rank === root && b > a) this.stageViews[h]![root]!.set(buf.subarray(a, b));
      this.call.arrive(t === 0);
      if (this.rank !== root && b > a) buf.set(this.stageViews[h]![root]!.subarray(0, b - a), a);
    }
    this.stats.bytes += n * 8;
  }
}
