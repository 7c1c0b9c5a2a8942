import { alignFloats } from '../../nn/flatLayout.ts';
import type { ModelParallelPlan, PlannedLayer } from './plan.ts';
import { unitShards } from './tensorParallel.ts';

/**
 * The shard part of a model-parallel device's flat buffer: which floats of which unsplit tensor
 * each device holds, computable for any device (rank 0 assembles the unsplit model from them).
 *
 * A shard tensor is a list of strided blocks of its unsplit tensor (row-major floats), in order:
 * a column split of a dense kernel [in, out] is one block of `in` runs; a row split one run; the
 * q, k and v rows of an attention's in_proj_weight that belong to a device's heads three runs (a
 * shard that is not one contiguous piece); a tensor every device holds whole (a row-parallel
 * layer's bias, a split block's layerNorm) one run of all of it, marked `replicated`.
 */

/** `rows` runs of `width` floats, `stride` apart, from `start` in the unsplit tensor. */
export interface Piece {
  start: number;
  rows: number;
  stride: number;
  width: number;
}

/** One tensor of a device's shard: its name inside the layer, its shape on the device, where it comes from. */
export interface ShardTensor {
  param: string;
  shape: number[];
  pieces: Piece[];
  /** the whole unsplit tensor, the same on every device */
  replicated: boolean;
}

/** Where one shard tensor lives in a device's shard part. */
export interface ShardEntry {
  /** checkpoint name of the unsplit tensor ('layers.7.kernel', 'layers.3.attn.layers.1.in_proj_weight') */
  name: string;
  layer: number;
  /** offset from the start of the shard part, and length */
  offset: number;
  size: number;
  pieces: readonly Piece[];
  /** every device holds the whole tensor (count it once in a norm over devices) */
  replicated: boolean;
}

const run = (start: number, width: number): Piece => ({ start, rows: 1, stride: 0, width });
const whole = (param: string, size: number): ShardTensor => ({
  param,
  shape: [size],
  pieces: [run(0, size)],
  replicated: true,
});

/** Columns [start, end) of a [rows, total] matrix, as one shard tensor [rows, end − start]. */
function columns(param: string, rows: number, total: number, range: { start: number; end: number }): ShardTensor {
  const w = range.end - range.start;
  return {
    param,
    shape: [rows, w],
    pieces: [{ start: range.start, rows, stride: total, width: w }],
    replicated: false,
  };
}

/** Rows [start, end) of a [total, width] matrix (a vector when width is 1 and `vector`). */
function rows(param: string, width: number, range: { start: number; end: number }, vector = false): ShardTensor {
  const n = range.end - range.start;
  return { param, shape: vector ? [n] : [n, width], pieces: [run(range.start * width, n * width)], replicated: false };
}

/** Device `rank`'s tensors of one planned layer, in the order its split layer binds them (none: nothing split). */
export function shardTensors(p: PlannedLayer, devices: number, rank: number): ShardTensor[] {
  if (p.kind === 'elementwise' || p.kind === 'spatial') return [];
  if (p.kind === 'transformer') return blockShards(p, devices, rank);
  if (p.kind === 'channel') {
    const {
      filters,
      kernelSize: [KH, KW],
      useBias,
    } = p.spec;
    const range = unitShards(filters, devices, `model.layers[${p.index}] conv2d`, 'filters').ranges[rank]!;
    const kernel = columns('kernel', KH * KW * p.inputShape[2]!, filters, range);
    return useBias ? [kernel, rows('bias', 1, range, true)] : [kernel];
  }
  const name = `model.layers[${p.index}] dense`;
  const { units, useBias } = p.spec;
  if (p.kind === 'column') {
    const range = unitShards(units, devices, name).ranges[rank]!;
    const kernel = columns('kernel', p.inFeatures, units, range);
    return useBias ? [kernel, rows('bias', 1, range, true)] : [kernel];
  }
  const range = unitShards(p.inFeatures, devices, name, 'input features').ranges[rank]!;
  const kernel = rows('kernel', units, range);
  return useBias ? [kernel, whole('bias', units)] : [kernel];
}

/**
 * A Megatron-split transformerBlock's tensors on device `rank` (names as the unsplit block's):
 * its heads' rows of q, k and v in in_proj_weight [3D, D] and in_proj_bias; its heads' columns
 * of out_proj.weight [D, D] (PyTorch's [out, in]); its block of the first MLP dense's units and
 * the same rows of the second's kernel; the layerNorms and the row-parallel biases whole.
 */
function blockShards(p: Extract<PlannedLayer, { kind: 'transformer' }>, devices: number, rank: number): ShardTensor[] {
  const D = p.inputShape[p.inputShape.length - 1]!,
    M = p.mlp;
  const Dl = D / devices,
    lo = rank * Dl,
    Ml = M / devices,
    mo = rank * Ml;
  const qkv = (width: number) => [0, 1, 2].map((part) => run((part * D + lo) * width, Dl * width));
  return [
    whole('attn.layers.0.gamma', D),
    whole('attn.layers.0.beta', D),
    { param: 'attn.layers.1.in_proj_weight', shape: [3 * Dl, D], pieces: qkv(D), replicated: false },
    { param: 'attn.layers.1.in_proj_bias', shape: [3 * Dl], pieces: qkv(1), replicated: false },
    columns('attn.layers.1.out_proj.weight', D, D, { start: lo, end: lo + Dl }),
    whole('attn.layers.1.out_proj.bias', D),
    whole('mlp.layers.0.gamma', D),
    whole('mlp.layers.0.beta', D),
    columns('mlp.layers.1.kernel', D, M, { start: mo, end: mo + Ml }),
    rows('mlp.layers.1.bias', 1, { start: mo, end: mo + Ml }, true),
    rows('mlp.layers.2.kernel', D, { start: mo, end: mo + Ml }),
    whole('mlp.layers.2.bias', D),
  ];
}

/** The shard part's layout on device `rank` (every device can compute every other's). */
export function shardLayout(plan: ModelParallelPlan, rank: number): { entries: ShardEntry[]; length: number } {
  const entries: ShardEntry[] = [];
  let at = 0;
  for (const p of plan.layers) {
    for (const t of shardTensors(p, plan.devices, rank)) {
      const size = t.shape.reduce((a, b) => a * b, 1);
      entries.push({
        name: `layers.${p.index}.${t.param}`,
        layer: p.index,
        offset: at,
        size,
        pieces: t.pieces,
        replicated: t.replicated,
      });
      at = alignFloats(at + size);
    }
  }
  return { entries, length: at };
}

/** Between an unsplit tensor and its shard: the pieces into the shard (`toShard`) or back into the tensor. */
export function copyPieces(full: Float32Array, shard: Float32Array, pieces: readonly Piece[], toShard: boolean): void {
  let at = 0;
  for (const { start, rows: n, stride, width } of pieces) {
    for (let r = 0; r < n; r++, at += width) {
      const f = full.subarray(start + r * stride, start + r * stride + width),
        s = shard.subarray(at, at + width);
      if (toShard) s.set(f);
      else f.set(s);
    }
  }
}

/**
 * Between the unsplit tensors of layer `layer` (`full(name)` by checkpoint name) and its shard
 * entries found at `base` in `buf`: into the shards (`toShard`) or back into the unsplit tensors.
 */
export function copyShard(
  layer: number,
  full: (name: string) => Float32Array,
  entries: readonly ShardEntry[],
  buf: Float32Array,
  base: number,
  toShard: boolean,
): void {
  for (const e of entries) {
    if (e.layer !== layer) continue;
    copyPieces(full(e.name), buf.subarray(base + e.offset, base + e.offset + e.size), e.pieces, toShard);
  }
}
