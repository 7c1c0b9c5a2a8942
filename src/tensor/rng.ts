/**
 * Counter-based random numbers (Philox4x32-10, Salmon et al. 2011): every draw is a pure function
 * of (key, counter). Keying draws by (seed, step, global sample index) makes a run repeatable and
 * dropout masks independent of how a batch is split across devices.
 */

const M0 = 0xd2511f53;
const M1 = 0xcd9e8d57;
const W0 = 0x9e3779b9;
const W1 = 0xbb67ae85;

/** High 32 bits of the 64-bit product of two uint32 values. */
function mulhi(a: number, b: number): number {
  const aLo = a & 0xffff,
    aHi = a >>> 16;
  const bLo = b & 0xffff,
    bHi = b >>> 16;
  const lo = aLo * bLo;
  const mid1 = aHi * bLo;
  const mid2 = aLo * bHi;
  const carry = ((lo >>> 16) + (mid1 & 0xffff) + (mid2 & 0xffff)) >>> 16;
  return (aHi * bHi + (mid1 >>> 16) + (mid2 >>> 16) + carry) >>> 0;
}

/** Philox4x32-10: writes four uint32 outputs for counter (c0..c3) under key (k0, k1). */
export function philox4x32(
  c0: number,
  c1: number,
  c2: number,
  c3: number,
  k0: number,
  k1: number,
  out: Uint32Array,
): void {
  for (let round = 0; round < 10; round++) {
    const hi0 = mulhi(M0, c0),
      lo0 = Math.imul(M0, c0) >>> 0;
    const hi1 = mulhi(M1, c2),
      lo1 = Math.imul(M1, c2) >>> 0;
    const n0 = (hi1 ^ c1 ^ k0) >>> 0;
    const n2 = (hi0 ^ c3 ^ k1) >>> 0;
    c0 = n0;
    c1 = lo1;
    c2 = n2;
    c3 = lo0;
    k0 = (k0 + W0) >>> 0;
    k1 = (k1 + W1) >>> 0;
  }
  out[0] = c0;
  out[1] = c1;
  out[2] = c2;
  out[3] = c3;
}

/** Mixes any number of integers into one uint32 (for deriving keys from seed and purpose). */
export function hashInts(...values: number[]): number {
  let h = 0x811c9dc5;
  for (const v of values) {
    let x = Math.floor(v) >>> 0;
    // splitmix-style finalizer on each input, then combine
    x = Math.imul(x ^ (x >>> 16), 0x7feb352d);
    x = Math.imul(x ^ (x >>> 15), 0x846ca68b);
    x ^= x >>> 16;
    h = Math.imul(h ^ x, 0x01000193) >>> 0;
    h = (h ^ (h >>> 13)) >>> 0;
    // high part of numbers above 2^32 (sample indices of long runs)
    const high = Math.floor(v / 4294967296);
    if (high !== 0) h = Math.imul(h ^ (high >>> 0), 0x9e3779b1) >>> 0;
  }
  return h >>> 0;
}

const TO_UNIT = 1 / 4294967296;

/**
 * A stream of uniform numbers keyed by a (key0, key1) pair; the position in the stream is the
 * counter, so `at(i)` is random access and `next()` walks forward.
 */
export class CounterRng {
  private readonly k0: number;
  private readonly k1: number;
  private counter = 0;
  private readonly block = new Uint32Array(4);
  private blockIndex = -1;

  constructor(...key: number[]) {
    this.k0 = hashInts(0x5eed, ...key);
    this.k1 = hashInts(0xc0ffee, ...key);
  }

  /** The stream's Philox key (a backend's dropoutForward draws from it). */
  get key(): readonly [number, number] {
    return [this.k0, this.k1];
  }

  /** uint32 number `i` of this stream. */
  uint32At(i: number): number {
    const blockIndex = Math.floor(i / 4);
    if (blockIndex !== this.blockIndex) {
      philox4x32(blockIndex >>> 0, Math.floor(blockIndex / 4294967296) >>> 0, 0, 0, this.k0, this.k1, this.block);
      this.blockIndex = blockIndex;
    }
    return this.block[i & 3]!;
  }

  /** Uniform in [0, 1). */
  at(i: number): number {
    return this.uint32At(i) * TO_UNIT;
  }

  next(): number {
    return this.at(this.counter++);
  }

  /** Standard normal by Box–Muller. */
  normal(): number {
    const u1 = 1 - this.next();
    const u2 = this.next();
    return Math.sqrt(-2 * Math.log(u1)) * Math.cos(2 * Math.PI * u2);
  }

  /** Integer in [0, n). */
  int(n: number): number {
    return Math.floor(this.next() * n);
  }

  /** In-place Fisher–Yates shuffle. */
  shuffle<T>(items: T[] | Int32Array | Uint32Array): void {
    for (let i = items.length - 1; i > 0; i--) {
      const j = this.int(i + 1);
      const t = items[i]!;
      items[i] = items[j]!;
      items[j] = t;
    }
  }
}
