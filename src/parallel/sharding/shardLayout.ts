/**
 * Which floats of a replica's flat buffers a device owns under ZeRO sharding (Rajbhandari et al.
 * 2020): the buffer is cut into pieces (the whole buffer, or hybrid's gradient buckets), and each
 * piece is split over the devices as `reduceScatter`/`allgather` split any buffer (`ownedSlice`).
 * A device's part is the union of its slices of every piece, so one reduce-scatter or all-gather
 * per piece moves exactly the owned parts.
 */
import { ownedSlice, type Communicator } from '../../comm/communicator.ts';
import type { FlatRange } from '../../optim/optimizer.ts';

export class ShardLayout {
  /** this device's ranges of the flat buffer, in buffer order (empty ones left out) */
  readonly owned: readonly FlatRange[];
  /** floats this device owns (Σ of `owned`'s lengths) */
  readonly ownedFloats: number;

  constructor(
    /** floats of the whole buffer */
    readonly size: number,
    /** the pieces, in the order their collectives run; together they cover [0, size) once */
    readonly pieces: readonly FlatRange[],
    readonly worldSize: number,
    readonly rank: number,
  ) {
    const covered = pieces.reduce((n, p) => n + (p.end - p.start), 0);
    if (covered !== size) throw new Error(`shard layout: pieces cover ${covered} floats of ${size}`);
    this.owned = pieces
      .map((p) => {
        const s = ownedSlice(p.end - p.start, worldSize, rank);
        return { start: p.start + s.start, end: p.start + s.end };
      })
      .filter((r) => r.end > r.start)
      .sort((a, b) => a.start - b.start);
    this.ownedFloats = this.owned.reduce((n, r) => n + (r.end - r.start), 0);
  }

  /** One piece over the whole buffer (stage 1: one all-gather of the weights). */
  static whole(size: number, worldSize: number, rank: number): ShardLayout {
    return new ShardLayout(size, size > 0 ? [{ start: 0, end: size }] : [], worldSize, rank);
  }

  /** Views of `buf` over this device's ranges. */
  views(buf: Float32Array): Float32Array[] {
    return this.owned.map((r) => buf.subarray(r.start, r.end));
  }

  /** Views of `packed`, which holds this device's ranges one after another (ZeRO stage 2 and 3's owned gradient). */
  packed(packed: Float32Array): Float32Array[] {
    let at = 0;
    return this.owned.map((r) => packed.subarray(at, (at += r.end - r.start)));
  }

  /** Every device's owned parts of `buf` become every device's: one all-gather per piece. */
  async allgather(comm: Communicator, buf: Float32Array): Promise<void> {
    for (const p of this.pieces) await comm.allgather(buf.subarray(p.start, p.end));
  }
}

/**
 * Hybrid's gradient buckets of a buffer of `size` floats as the backward pass reports `offsets`
 * (grads[offset:] final, last layers first): a bucket closes at the first offset at least
 * `bucketFloats` below the previous close; what is left, down to 0, is the last bucket. The same
 * rule as strategies/hybrid.ts applies step by step, computed once.
 */
export function gradientBuckets(size: number, offsets: readonly number[], bucketFloats: number): FlatRange[] {
  const buckets: FlatRange[] = [];
  let from = size;
  for (const offset of offsets) {
    if (offset <= 0 || from - offset < bucketFloats) continue;
    buckets.push({ start: offset, end: from });
    from = offset;
  }
  if (from > 0) buckets.push({ start: 0, end: from });
  return buckets;
}
