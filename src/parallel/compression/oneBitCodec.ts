/**
 * 1-bit quantisation with error feedback (Seide et al., Interspeech 2014), the arithmetic alone.
 *
 * The gradient is cut into groups, each quantised with its own two reconstruction values: an
 * element v ≥ 0 is sent as its sign bit 0 and rebuilt as the mean of the group's non-negative
 * elements, one v < 0 as bit 1 and the mean of its negative elements — the paper's per-column
 * means of the positive and the negative part, which minimise the group's squared error for those
 * signs. A group is a run of consecutive rows of a weight matrix (rows of shape[0] × rest: for a
 * dense kernel [in, out], the weights leaving one input, the paper's column of its out × in
 * matrix), as many rows as make at least MIN_GROUP values, so that the two scales cost little
 * beside the bits; a vector (bias) is one group; so is each stretch of padding between tensors.
 * What is not sent stays behind: the quantisation error v − q is the next step's residual.
 *
 * A packed chunk is 2·S floats (the S segments' positive and negative values) then ⌈len/32⌉
 * 32-bit words of signs, bit k of word w for element 32·w + k of the chunk.
 */
import { gaps, type TensorPlace } from './tensors.ts';

/** The fewest values a group of matrix rows holds (one row when a row is longer). */
export const MIN_GROUP = 512;

/** Where the groups of [0, n) start, ascending, from 0 (each group runs to the next start or n). */
export function groupStarts(n: number, places: readonly TensorPlace[]): number[] {
  const starts = new Set<number>();
  for (const p of places) {
    const step = p.matrix ? Math.max(1, Math.ceil(MIN_GROUP / p.cols)) * p.cols : p.size;
    for (let s = p.offset; s < p.offset + p.size; s += step) starts.add(s);
  }
  for (const g of gaps(n, places)) starts.add(g.start);
  return [...starts].filter((s) => s < n).sort((a, b) => a - b);
}

/** A run [start, end) of the flat gradient quantised with its own two values: a group cut at chunk boundaries. */
export interface Segment {
  start: number;
  end: number;
}

/** The segments of the chunk [start, end): the groups of `starts` that meet it, cut to it. */
export function chunkSegments(starts: readonly number[], start: number, end: number): Segment[] {
  const out: Segment[] = [];
  let a = start;
  for (const s of starts) {
    if (s <= a) continue;
    if (s >= end) break;
    out.push({ start: a, end: s });
    a = s;
  }
  if (end > a) out.push({ start: a, end });
  return out;
}

/** Floats of a packed chunk of `len` values in `segments` segments. */
export function packedFloats(len: number, segments: number): number {
  return 2 * segments + Math.ceil(len / 32);
}

const signWords = (packed: Float32Array, at: number, segments: number, len: number) =>
  new Uint32Array(packed.buffer, packed.byteOffset + (at + 2 * segments) * 4, Math.ceil(len / 32));

/**
 * Quantises `values` over the chunk `segments` (which start at `chunkStart`) into `packed` at
 * `at`, leaving the quantisation error in `values`: afterwards values + dequantised = the input
 * (to the rounding of one float32 subtraction).
 */
export function quantise(
  values: Float32Array,
  chunkStart: number,
  segments: readonly Segment[],
  packed: Float32Array,
  at: number,
): void {
  const len = segments.length ? segments[segments.length - 1]!.end - chunkStart : 0;
  // the signs go through a Uint32Array view: a float's element copy could rewrite a NaN's bits
  const words = signWords(packed, at, segments.length, len);
  words.fill(0);
  for (const [k, seg] of segments.entries()) {
    let pos = 0,
      nPos = 0,
      neg = 0,
      nNeg = 0;
    for (let i = seg.start; i < seg.end; i++) {
      const v = values[i]!;
      if (v < 0) {
        neg += v;
        nNeg++;
      } else {
        pos += v;
        nPos++;
      }
    }
    const up = Math.fround(nPos ? pos / nPos : 0),
      down = Math.fround(nNeg ? neg / nNeg : 0);
    packed[at + 2 * k] = up;
    packed[at + 2 * k + 1] = down;
    for (let i = seg.start; i < seg.end; i++) {
      const v = values[i]!,
        j = i - chunkStart;
      if (v < 0) {
        words[j >>> 5] = words[j >>> 5]! | (1 << (j & 31));
        values[i] = v - down;
      } else values[i] = v - up;
    }
  }
}

/** The values a packed chunk stands for, written (or, with `add`, added) into `into` over the chunk's segments. */
export function dequantise(
  packed: Float32Array,
  at: number,
  chunkStart: number,
  segments: readonly Segment[],
  into: Float32Array,
  add = false,
): void {
  const len = segments.length ? segments[segments.length - 1]!.end - chunkStart : 0;
  const words = signWords(packed, at, segments.length, len);
  for (const [k, seg] of segments.entries()) {
    const up = packed[at + 2 * k]!,
      down = packed[at + 2 * k + 1]!;
    for (let i = seg.start; i < seg.end; i++) {
      const j = i - chunkStart;
      const q = (words[j >>> 5]! >>> (j & 31)) & 1 ? down : up;
      into[i] = add ? into[i]! + q : q;
    }
  }
}
