import { alignFloats } from '../../nn/flatLayout.ts';
import type { ModelParallelPlan } from './plan.ts';
import { columnShardCopy, rowShardCopy, unitShards } from './tensorParallel.ts';

/**
 * The shard part of a model-parallel device's flat buffer: which slice of which unsplit tensor
 * each device holds, computable for any device (rank 0 assembles the unsplit model from them).
 */

/**
 * Where one shard tensor of a model-parallel dense layer lives in a device's shard part. A
 * channel-split conv2d's slice is a 'column' shard too: its kernel [KH, KW, C, F] is a matrix
 * [KH·KW·C, F] whose columns are the filters.
 */
export interface ShardEntry {
  /** checkpoint name of the unsplit tensor ('layers.7.kernel') */
  name: string;
  layer: number;
  param: 'kernel' | 'bias';
  kind: 'column' | 'row';
  /** offset from the start of the shard part, and length */
  offset: number;
  size: number;
  /** units (column) or input features (row) this device holds */
  range: { start: number; end: number };
  inFeatures: number;
  units: number;
}

/** The shard part's layout on device `rank` (every device can compute every other's). */
export function shardLayout(plan: ModelParallelPlan, rank: number): { entries: ShardEntry[]; length: number } {
  const entries: ShardEntry[] = [];
  let at = 0;
  for (const p of plan.layers) {
    if (p.kind === 'elementwise' || p.kind === 'spatial') continue;
    if (p.kind === 'channel') {
      const {
          filters: units,
          kernelSize: [KH, KW],
          useBias,
        } = p.spec,
        inFeatures = KH * KW * p.inputShape[2]!;
      const range = unitShards(units, plan.devices, `model.layers[${p.index}] conv2d`, 'filters').ranges[rank]!;
      const w = range.end - range.start;
      for (const [param, size] of (useBias
        ? [
            ['kernel', inFeatures * w],
            ['bias', w],
          ]
        : [['kernel', inFeatures * w]]) as ['kernel' | 'bias', number][]) {
        entries.push({
          name: `layers.${p.index}.${param}`,
          layer: p.index,
          param,
          kind: 'column',
          offset: at,
          size,
          range,
          inFeatures,
          units,
        });
        at = alignFloats(at + size);
      }
      continue;
    }
    const name = `model.layers[${p.index}] dense`;
    const { units, useBias } = p.spec;
    const range =
      p.kind === 'column'
        ? unitShards(units, plan.devices, name).ranges[rank]!
        : unitShards(p.inFeatures, plan.devices, name, 'input features').ranges[rank]!;
    const w = range.end - range.start;
    const shapes: ['kernel' | 'bias', number][] = [['kernel', p.kind === 'column' ? p.inFeatures * w : w * units]];
    if (useBias) shapes.push(['bias', p.kind === 'column' ? w : units]);
    for (const [param, size] of shapes) {
      entries.push({
        name: `layers.${p.index}.${param}`,
        layer: p.index,
        param,
        kind: p.kind,
        offset: at,
        size,
        range,
        inFeatures: p.inFeatures,
        units,
      });
      at = alignFloats(at + size);
    }
  }
  return { entries, length: at };
}

/**
 * Between a full kernel/bias and the shard entries of layer `layer` found at `base` in `buf`:
 * into the shard (`toShard`) or back into the full tensors.
 */
export function copyShard(
  layer: number,
  full: { kernel: Float32Array; bias?: Float32Array },
  entries: ShardEntry[],
  buf: Float32Array,
  base: number,
  toShard: boolean,
): void {
  const mine = entries.filter((e) => e.layer === layer);
  const k = mine.find((e) => e.param === 'kernel')!,
    b = mine.find((e) => e.param === 'bias');
  const shard = {
    kernel: buf.subarray(base + k.offset, base + k.offset + k.size),
    bias: b ? buf.subarray(base + b.offset, base + b.offset + b.size) : undefined,
  };
  if (k.kind === 'column') columnShardCopy(full, shard, k.inFeatures, k.units, k.range, toShard);
  else rowShardCopy(full, shard, k.units, k.range, toShard);
}
