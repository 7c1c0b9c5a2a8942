/**
 * The data path of the tcp transport in WebAssembly SIMD: hashing payloads (the data-frame
 * checksum) and float32 addition, in fixed-size wasm memories ("arenas", never grown: growing
 * would detach every view of them; not shared: copies into shared memory are slower).
 *
 * Received data-frame payloads are written straight into slots of an arena by the decoder,
 * which hashes them as they arrive. With the optional native addon (nativeDataPath.ts) the reduce
 * step and the hashing of the caller's floats run in place, in one pass. Without it, a
 * reduce-scatter step copies the caller's chunk in, adds with f32x4 and copies the sum back (two
 * memcpys and one SIMD pass, still well ahead of a JS loop), and sends of caller data are hashed by
 * copying 64 KiB pieces through a scratch area.
 *
 * The hash ("ptr32", 32 lanes): 32 u32 lanes (8 v128 accumulators) seeded like xxh32's v1–v4
 * with seeds 0–7; each lane consumes every 32nd little-endian word of the 128-byte stripes with
 * the xxh32 round acc = rotl(acc + w·P2, 13)·P1; then h = len + P5, folded with every lane and
 * every tail word (h = rotl(h + x·P3, 17)·P4), and xxh32's avalanche. Payloads are multiples of
 * 4 bytes. Each lane's rounds form a chain of dependent multiplies, so the lanes are many: 32
 * keep a core's multipliers busy (fewer lanes, or zlib's CRC32, leave them waiting).
 * hashPayloadJs is the reference.
 *
 * The bytes below are binaryen's binary of the WAT text kept beside this file in dataPath.wat
 * (a test rebuilds it and compares).
 */
import { loadTcpNative, type TcpNativeAddon } from './nativeDataPath.ts';

export const DATA_PATH_WASM_BASE64 =
  'AGFzbQEAAAABDgJgA39/fwBgBH9/f30AAg8BA2VudgZtZW1vcnkCAAEDAwIAAQcOAgRoYXNoAAADYWRkAAEKsgUCgQQCAX8Le0Gx893xef0RIQxB95Svr3j9ESENIAD9AAQAIQQgAP0ABBAhBSAA/QAEICEGIAD9AAQwIQcgAP0ABEAhCCAA/QAEUCEJIAD9AARgIQogAP0ABHAhCyABIAJqIQMCQANAIAEgA08NASAEIAH9AAQAIA39tQH9rgEhDiAOQQ39qwEgDkET/a0B/VAgDP21ASEEIAUgAf0ABBAgDf21Af2uASEOIA5BDf2rASAOQRP9rQH9UCAM/bUBIQUgBiAB/QAEICAN/bUB/a4BIQ4gDkEN/asBIA5BE/2tAf1QIAz9tQEhBiAHIAH9AAQwIA39tQH9rgEhDiAOQQ39qwEgDkET/a0B/VAgDP21ASEHIAggAf0ABEAgDf21Af2uASEOIA5BDf2rASAOQRP9rQH9UCAM/bUBIQggCSAB/QAEUCAN/bUB/a4BIQ4gDkEN/asBIA5BE/2tAf1QIAz9tQEhCSAKIAH9AARgIA39tQH9rgEhDiAOQQ39qwEgDkET/a0B/VAgDP21ASEKIAsgAf0ABHAgDf21Af2uASEOIA5BDf2rASAOQRP9rQH9UCAM/bUBIQsgAUGAAWohAQwACwALIAAgBP0LBAAgACAF/QsEECAAIAb9CwQgIAAgB/0LBDAgACAI/QsEQCAAIAn9CwRQIAAgCv0LBGAgACAL/QsEcAusAQMDfwJ7AX0gA/0TIQcgA0MAAAAAXCEGIAAgAkECdGohBCAEQRBrIQUCQANAIAAgBUoNASAA/QAEACAB/QAEAP3kASEIIAYEQCAIIAf95wEhCAsgACAI/QsEACAAQRBqIQAgAUEQaiEBDAALAAsCQANAIAAgBE8NASAAKgIAIAEqAgCSIQkgBgRAIAkgA5UhCQsgACAJOAIAIABBBGohACABQQRqIQEMAAsACws=';

const P1 = 2654435761,
  P2 = 2246822519,
  P3 = 3266489917,
  P4 = 668265263,
  P5 = 374761393;
/** hash lanes, and the bytes of a stripe (one word per lane): the hash runs over whole stripes */
const LANES = 32;
export const HASH_STRIPE = LANES * 4;
/** the bytes of the whole stripes in `bytes` bytes: what the lanes take, the rest is the tail */
const wholeStripes = (bytes: number) => bytes - (bytes % HASH_STRIPE);
export const HASH_STATE_BYTES = LANES * 4;
/** the piece size of copy-through operations */
const PIECE = 64 * 1024;

const rotl = (x: number, r: number) => ((x << r) | (x >>> (32 - r))) >>> 0;

function initialLanes(): Uint32Array {
  const s = new Uint32Array(LANES);
  for (let a = 0; a < LANES / 4; a++) {
    s[a * 4] = (P1 + P2 + a) >>> 0;
    s[a * 4 + 1] = (P2 + a) >>> 0;
    s[a * 4 + 2] = a;
    s[a * 4 + 3] = (a - P1) >>> 0;
  }
  return s;
}
const INITIAL = initialLanes();

function finalize(lanes: Uint32Array, tail: ArrayLike<number>, len: number): number {
  let h = (len + P5) >>> 0;
  for (let i = 0; i < LANES; i++) h = Math.imul(rotl((h + Math.imul(lanes[i]!, P3)) >>> 0, 17), P4) >>> 0;
  for (let i = 0; i < tail.length; i++) h = Math.imul(rotl((h + Math.imul(tail[i]!, P3)) >>> 0, 17), P4) >>> 0;
  h ^= h >>> 15;
  h = Math.imul(h, P2) >>> 0;
  h ^= h >>> 13;
  h = Math.imul(h, P3) >>> 0;
  h ^= h >>> 16;
  return h >>> 0;
}

/** The data-frame hash in plain JS (reference; used where no data path is at hand). */
export function hashPayloadJs(bytes: Uint8Array): number {
  if (bytes.length % 4 !== 0) throw new RangeError('data payloads are whole float32s');
  const words = bytes.length / 4;
  const dv = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const lanes = INITIAL.slice();
  const full = words - (words % LANES);
  for (let w = 0; w < full; w++) {
    const l = w % LANES;
    lanes[l] = Math.imul(rotl((lanes[l]! + Math.imul(dv.getUint32(w * 4, true), P2)) >>> 0, 13), P1) >>> 0;
  }
  const tail: number[] = [];
  for (let w = full; w < words; w++) tail.push(dv.getUint32(w * 4, true));
  return finalize(lanes, tail, bytes.length);
}

let cachedModule: WebAssembly.Module | undefined;

interface Exports {
  hash(st: number, p: number, n: number): void;
  add(dst: number, src: number, n: number, div: number): void;
}

const ARENA_BYTES = 32 * 1024 * 1024;

/** One fixed-size wasm memory with its own instance, scratch area and hash state. */
class Arena {
  readonly memory: WebAssembly.Memory;
  readonly fn: Exports;
  readonly ab: ArrayBuffer;
  readonly u8: Uint8Array;
  readonly f32: Float32Array;
  readonly u32: Uint32Array;
  readonly scratch = 64;
  readonly state = 64 + PIECE;
  top = 64 + PIECE + HASH_STATE_BYTES;

  constructor(bytes: number) {
    const pages = Math.ceil(bytes / 65536);
    cachedModule ??= new WebAssembly.Module(Buffer.from(DATA_PATH_WASM_BASE64, 'base64'));
    this.memory = new WebAssembly.Memory({ initial: pages, maximum: pages });
    this.fn = new WebAssembly.Instance(cachedModule, { env: { memory: this.memory } }).exports as unknown as Exports;
    this.ab = this.memory.buffer;
    this.u8 = new Uint8Array(this.ab);
    this.f32 = new Float32Array(this.ab);
    this.u32 = new Uint32Array(this.ab);
  }

  /** 64-byte aligned bump allocation, or -1 when full. */
  alloc(bytes: number): number {
    const addr = (this.top + 63) & ~63;
    if (addr + bytes > this.ab.byteLength) return -1;
    this.top = addr + bytes;
    return addr;
  }

  loadState(lanes: Uint32Array): void {
    this.u32.set(lanes, this.state >> 2);
  }

  saveState(lanes: Uint32Array): void {
    lanes.set(this.u32.subarray(this.state >> 2, (this.state >> 2) + LANES));
  }
}

/** The words of `bytes` from byte `from` on (a multiple of 4 bytes), as numbers. */
function tailWords(bytes: Uint8Array, from: number): Uint32Array {
  const tail = bytes.subarray(from);
  const words = new Uint32Array(tail.length >> 2);
  new Uint8Array(words.buffer).set(tail);
  return words;
}

/** A running hash: its lanes, kept in JS between pieces (a payload's pieces may sit in any arena). */
export function newHashLanes(): Uint32Array {
  return INITIAL.slice();
}

export function resetHashLanes(lanes: Uint32Array): void {
  lanes.set(INITIAL);
}

/**
 * One communicator's wasm data path: payload slots (power-of-two sizes, recycled), hashing and
 * the SIMD reduce step. Slots are Buffers over an arena; anything else passed in is ignored or
 * handled by copying.
 */
export class TcpDataPath {
  /** the native addon doing hashing and reduction in place, or null (the wasm arenas do it) */
  readonly native: TcpNativeAddon | null;
  private readonly arenas: Arena[] = [];
  private readonly arenaOf = new Map<ArrayBufferLike, Arena>();
  private readonly free = new Map<number, Buffer[]>();
  /** live slots by arena buffer and address → capacity */
  private readonly live = new Map<Arena, Map<number, number>>();
  private readonly lanes = newHashLanes();

  /** `native`: use the addon when it is built (default), or never */
  constructor(
    private readonly arenaBytes = ARENA_BYTES,
    native = true,
  ) {
    this.native = native ? loadTcpNative() : null;
    this.addArena(arenaBytes);
  }

  private addArena(bytes: number): Arena {
    const a = new Arena(bytes);
    this.arenas.push(a);
    this.arenaOf.set(a.ab, a);
    this.live.set(a, new Map());
    return a;
  }

  /** A payload slot: a Buffer of exactly `len` bytes, 64-byte aligned, in an arena. */
  getSlot(len: number): Buffer {
    const cap = Math.max(4096, 2 ** Math.ceil(Math.log2(Math.max(1, len))));
    let b = this.free.get(cap)?.pop();
    if (!b) {
      let arena = this.arenas[this.arenas.length - 1]!;
      let addr = arena.alloc(cap);
      if (addr < 0) {
        arena = this.addArena(Math.max(this.arenaBytes, cap + 128 * 1024));
        addr = arena.alloc(cap);
      }
      b = Buffer.from(arena.ab, addr, cap);
    }
    this.live.get(this.arenaOf.get(b.buffer)!)!.set(b.byteOffset, cap);
    return b.subarray(0, len);
  }

  /** Returns a slot (given any Buffer over its start) for reuse; anything else is ignored. */
  putSlot(payload: Uint8Array): void {
    const arena = this.arenaOf.get(payload.buffer);
    if (!arena) return;
    const live = this.live.get(arena)!;
    const cap = live.get(payload.byteOffset);
    if (cap === undefined) return;
    live.delete(payload.byteOffset);
    let list = this.free.get(cap);
    if (!list) this.free.set(cap, (list = []));
    list.push(Buffer.from(arena.ab, payload.byteOffset, cap));
  }

  /** Whether `b` is (the start of) a live slot. */
  isSlot(b: Uint8Array): boolean {
    const arena = this.arenaOf.get(b.buffer);
    return !!arena && this.live.get(arena)!.has(b.byteOffset);
  }

  /** Feeds bytes [from, to) of slot `b` (to − from a multiple of HASH_STRIPE) into `lanes`; with the native path `b` may be any memory. */
  hashSlot(lanes: Uint32Array, b: Uint8Array, from: number, to: number): void {
    if (to <= from) return;
    if (this.native) {
      this.native.hash(lanes, b.subarray(from, to));
      return;
    }
    const arena = this.arenaOf.get(b.buffer)!;
    arena.loadState(lanes);
    arena.fn.hash(arena.state, b.byteOffset + from, to - from);
    arena.saveState(lanes);
  }

  /** The final hash of a `b.length`-byte payload whose first `hashed` bytes are in `lanes`. */
  finish(lanes: Uint32Array, b: Uint8Array, hashed: number): number {
    const arena = this.arenaOf.get(b.buffer);
    if (!arena) return finalize(lanes, tailWords(b, hashed), b.length);
    const at = (b.byteOffset + hashed) >> 2;
    return finalize(lanes, arena.u32.subarray(at, at + ((b.length - hashed) >> 2)), b.length);
  }

  /** Hash of any bytes, copied through the scratch area in 64 KiB pieces. */
  hashBytes(bytes: Uint8Array): number {
    if (bytes.length % 4 !== 0) throw new RangeError('data payloads are whole float32s');
    const full = wholeStripes(bytes.length);
    if (this.native) {
      this.lanes.set(INITIAL);
      this.native.hash(this.lanes, bytes);
      return finalize(this.lanes, tailWords(bytes, full), bytes.length);
    }
    const a = this.arenas[0]!;
    a.loadState(INITIAL);
    let off = 0;
    for (; off < full; off += PIECE) {
      const m = Math.min(PIECE, full - off);
      a.u8.set(bytes.subarray(off, off + m), a.scratch);
      a.fn.hash(a.state, a.scratch, m);
    }
    a.saveState(this.lanes);
    return finalize(this.lanes, tailWords(bytes, full), bytes.length);
  }

  /**
   * The reduce step: slot `b` holds dst.length incoming floats; afterwards `dst` holds
   * f32(incoming + dst) (then divided by `div` when non-zero) and the slot's contents are
   * unspecified. Returns the hash of the result when `wantHash` (to forward it without hashing
   * again), else 0.
   */
  reduceInto(dst: Float32Array, b: Uint8Array, div: number, wantHash: boolean): number {
    if (this.native) {
      if (wantHash) this.lanes.set(INITIAL);
      this.native.addHash(dst, b, div, wantHash ? this.lanes : null);
      if (!wantHash) return 0;
      const full = wholeStripes(dst.length * 4);
      return finalize(
        this.lanes,
        new Uint32Array(dst.buffer, dst.byteOffset + full, dst.length - (full >> 2)),
        dst.length * 4,
      );
    }
    const a = this.arenaOf.get(b.buffer)!;
    const n = dst.length,
      pf = PIECE / 4,
      base = b.byteOffset >> 2;
    if (wantHash) a.loadState(INITIAL);
    for (let o = 0; o < n; o += pf) {
      const m = Math.min(pf, n - o);
      a.f32.set(dst.subarray(o, o + m), a.scratch >> 2);
      const at = b.byteOffset + o * 4;
      a.fn.add(at, a.scratch, m, div);
      if (wantHash) a.fn.hash(a.state, at, wholeStripes(m * 4));
      dst.set(a.f32.subarray(base + o, base + o + m), o);
    }
    if (!wantHash) return 0;
    a.saveState(this.lanes);
    const full = wholeStripes(n * 4);
    return finalize(this.lanes, a.u32.subarray(base + full / 4, base + n), n * 4);
  }
}
