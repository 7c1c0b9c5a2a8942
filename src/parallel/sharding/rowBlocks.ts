/**
 * ZeRO stage 3's `rowBlockBytes`: a dense layer larger than the bound is gathered a block of its
 * kernel's rows at a time rather than whole (nn/denseRowBlocks.ts computes with it so), so what a
 * device holds gathered at once is bounded by the block, not by the model's largest layer. A
 * layer's blocks are pieces of the shard layout of their own, cut out of the gradient bucket that
 * held the layer; each is gathered, used and reduce-scattered as a unit is (weightShards.ts).
 */
import type { FlatRange } from '../../optim/optimizer.ts';
import { ShardLayout } from './shardLayout.ts';

/** Layer i's parameters as a kernel [rows, rowFloats] then a bias, where the layer can run in row blocks. */
export interface RowSplit {
  kernel: FlatRange;
  rows: number;
  rowFloats: number;
  bias: FlatRange | null;
}

/** One block: its piece of the flat buffer (the first from the layer's start, the last to its end) and its kernel rows. */
export interface RowBlockPiece {
  piece: FlatRange;
  rows: readonly [number, number];
  /** the bias, with the last block */
  bias: FlatRange | null;
}

/** A split layer and its blocks in row order. */
export interface RowBlockPlan {
  layer: number;
  range: FlatRange;
  rowFloats: number;
  blocks: RowBlockPiece[];
}

/** What the plan needs of the model (nn/model.ts Sequential). */
export interface RowSplittable {
  readonly layers: readonly unknown[];
  layerParamRange(i: number): FlatRange | null;
  rowSplit(i: number): RowSplit | null;
}

/** The layers that can run in row blocks and hold more than `maxFloats`, cut into blocks of at most that (one row at least). */
export function planRowBlocks(model: RowSplittable, maxFloats: number): RowBlockPlan[] {
  if (!(maxFloats > 0)) return [];
  const plans: RowBlockPlan[] = [];
  for (let i = 0; i < model.layers.length; i++) {
    const range = model.layerParamRange(i),
      split = model.rowSplit(i);
    if (!range || !split || range.end - range.start <= maxFloats) continue;
    const per = Math.max(1, Math.floor(maxFloats / split.rowFloats));
    const blocks: RowBlockPiece[] = [];
    for (let r0 = 0; r0 < split.rows; r0 += per) {
      const r1 = Math.min(split.rows, r0 + per),
        last = r1 === split.rows;
      blocks.push({
        piece: {
          start: r0 === 0 ? range.start : split.kernel.start + r0 * split.rowFloats,
          end: last ? range.end : split.kernel.start + r1 * split.rowFloats,
        },
        rows: [r0, r1],
        bias: last ? split.bias : null,
      });
    }
    plans.push({ layer: i, range, rowFloats: split.rowFloats, blocks });
  }
  return plans;
}

/**
 * `pieces` with every split layer's range cut out of its piece and replaced by its blocks: the
 * piece's floats before the layer, the blocks, the floats after it (each left out when empty).
 */
export function splitPieces(pieces: readonly FlatRange[], plans: readonly RowBlockPlan[]): FlatRange[] {
  return pieces.flatMap((piece) => {
    const inside = plans
      .filter((p) => piece.start <= p.range.start && p.range.end <= piece.end)
      .sort((a, b) => a.range.start - b.range.start);
    const out: FlatRange[] = [];
    let from = piece.start;
    for (const p of inside) {
      if (p.range.start > from) out.push({ start: from, end: p.range.start });
      out.push(...p.blocks.map((b) => b.piece));
      from = p.range.end;
    }
    if (piece.end > from) out.push({ start: from, end: piece.end });
    return out;
  });
}

/** `layout` with its pieces split so (the same layout when nothing splits). */
export function splitLayout(layout: ShardLayout, plans: readonly RowBlockPlan[]): ShardLayout {
  if (plans.length === 0) return layout;
  return new ShardLayout(layout.size, splitPieces(layout.pieces, plans), layout.worldSize, layout.rank);
}
