/**
 * ZeRO stage 2's and 3's units (gradientShards.ts, weightShards.ts): which layers each piece of
 * the shard layout holds, where this device's slice of it lies in its owned buffers, and the units
 * that a layer reads besides its own (a tied output projection reads the embedding's weights):
 * those are "pinned", held in workspaces of their own (stage 3 gathers their weights from their
 * first use to their reader's last, forward and backward), so that the reader's gradient adds
 * into the same gradient workspace as the unit's own layers'.
 */
import { ownedSlice } from '../../comm/communicator.ts';
import type { FlatRange } from '../../optim/optimizer.ts';
import type { ParameterResidency, RowBlockSource } from '../../nn/residency.ts';
import type { ShardLayout } from './shardLayout.ts';
import type { RowBlockPlan, RowSplit } from './rowBlocks.ts';

/** What weight sharding needs of a model (nn/model.ts Sequential). */
export interface ShardableModel {
  params: Float32Array;
  grads: Float32Array;
  readonly layers: readonly unknown[];
  residency: ParameterResidency | null;
  layerParamRange(i: number): FlatRange | null;
  /** the layer whose weights layer i reads besides its own (null: none) */
  sharedWeightsOf(i: number): number | null;
  bindLayer(i: number, params: Float32Array, grads: Float32Array, base: number): void;
  releaseLayer(i: number): void;
  useWhole(params: Float32Array, grads: Float32Array): void;
  /** layer i's parameters as kernel rows then a bias, where it can run in row blocks (rowBlocks.ts); null: it cannot */
  rowSplit(i: number): RowSplit | null;
  /** layer i gathered a block of kernel rows at a time (null: bound whole again) */
  useRowBlocks(i: number, blocks: RowBlockSource | null): void;
}

/** One unit: a piece of the layout, its layers, and where this device's slice of it lies in the owned buffers. */
export interface Unit {
  piece: FlatRange;
  /** its first and last layer (pieces are contiguous, so every layer in between is its own) */
  first: number;
  last: number;
  /** this device's slice, relative to the piece */
  own: FlatRange;
  /** the slice's offset in the owned buffers */
  at: number;
  /** pinned: read by a later layer too (held in the second workspace until `lastReader` has run forward) */
  pinned: boolean;
  lastReader: number;
  /** frozen floats (initFrom.freeze) of this device's slice, relative to it: no gradient to speak of */
  frozen: FlatRange[];
  /** a block of a layer's kernel rows (rowBlocks.ts): its rows and, with the last block, the bias (absolute); the layer's unitOf is −1 */
  block?: { rows: readonly [number, number]; rowFloats: number; bias: FlatRange | null };
}

export interface UnitPlan {
  units: Unit[];
  /** per layer, its unit (−1: no parameters) */
  unitOf: number[];
  /** per layer, the pinned unit it reads besides its own (−1: none) */
  reads: number[];
  /** floats of the largest unit of each workspace: ordinary, pinned */
  largest: [number, number];
  /** per layer gathered in row blocks, its blocks' units in row order */
  blocksOf: Map<number, number[]>;
}

export function planUnits(
  model: ShardableModel,
  layout: ShardLayout,
  frozen: readonly FlatRange[] = [],
  rowBlocks: readonly RowBlockPlan[] = [],
): UnitPlan {
  const at = new Map<number, number>();
  let offset = 0;
  for (const r of layout.owned) {
    at.set(r.start, offset);
    offset += r.end - r.start;
  }
  const split = new Map(rowBlocks.map((p) => [p.layer, p]));
  const unitOf = model.layers.map((_, i) => {
    const range = model.layerParamRange(i);
    if (!range || split.has(i)) return -1;
    const u = layout.pieces.findIndex((p) => p.start <= range.start && range.end <= p.end);
    if (u < 0) throw new Error(`ZeRO stage 2/3: layer ${i}'s weights cross a piece of the shard layout`);
    return u;
  });
  const reads = model.layers.map((_, i) => {
    const from = model.sharedWeightsOf(i);
    return from === null || from < 0 ? -1 : unitOf[from]!;
  });
  const units = layout.pieces.map((piece, u): Unit => {
    const layers = unitOf.flatMap((v, i) => (v === u ? [i] : []));
    const readers = reads.flatMap((v, i) => (v === u && unitOf[i] !== u ? [i] : []));
    const own = ownedSlice(piece.end - piece.start, layout.worldSize, layout.rank);
    const from = piece.start + own.start,
      to = piece.start + own.end;
    return {
      piece,
      first: layers[0] ?? -1,
      last: layers[layers.length - 1] ?? -1,
      own,
      at: at.get(piece.start + own.start) ?? 0,
      pinned: readers.length > 0,
      lastReader: readers.length > 0 ? readers[readers.length - 1]! : -1,
      frozen: frozen
        .map((f) => ({ start: Math.max(f.start, from) - from, end: Math.min(f.end, to) - from }))
        .filter((f) => f.end > f.start),
    };
  });
  const blocksOf = new Map<number, number[]>();
  for (const p of rowBlocks) {
    const us = p.blocks.map((b) => {
      const u = layout.pieces.findIndex((q) => q.start === b.piece.start && q.end === b.piece.end);
      if (u < 0) throw new Error(`ZeRO stage 3: layer ${p.layer}'s row block is not a piece of the shard layout`);
      units[u] = {
        ...units[u]!,
        first: p.layer,
        last: p.layer,
        block: { rows: b.rows, rowFloats: p.rowFloats, bias: b.bias },
      };
      return u;
    });
    blocksOf.set(p.layer, us);
  }
  if (units.filter((u) => u.pinned).length > 1)
    throw new Error('train.strategy.hybrid.shard 2 and 3: more than one unit is read by other layers; use shard: 1');
  const size = (pinned: boolean) =>
    Math.max(1, ...units.filter((u) => u.pinned === pinned).map((u) => u.piece.end - u.piece.start));
  return {
    units,
    unitOf,
    reads: reads.map((u, i) => (u === unitOf[i] ? -1 : u)),
    largest: [size(false), size(true)],
    blocksOf,
  };
}
