import type { DenseSpec, LayerSpec, ModelSpec } from '../nn/spec.ts';
import { unitShards } from './tensorParallel.ts';

/**
 * Where "one weird trick" (Krizhevsky 2014) splits a model: layers [0, begin) run data-parallel (each
 * device its own samples, gradients all-reduced), layers [begin, end) tensor-parallel on every
 * device's samples at once, layers [end, n) data-parallel again. `begin` is the first and `end − 1`
 * the last dense layer marked `parallel: model`.
 *
 * Inside, the activation between layers is one of
 *   'rows'  — this device's samples, all features (data-parallel; only where the section starts)
 *   'full'  — every device's samples, all features, the same on every device
 *   'shard' — every device's samples, this device's block of features
 * A model-parallel dense layer whose input is 'rows' or 'full' is column-parallel (output units
 * split → 'shard'); one whose input is 'shard' is row-parallel (input features split → 'full'),
 * so a column/row pair needs no communication in between (Megatron-LM). Activations, dropout and
 * flatten act on any form. The section ends in 'rows' for the data-parallel tail and the loss.
 */

export type ActivationForm = 'rows' | 'full' | 'shard';

export type PlannedLayer =
  | { index: number; kind: 'column'; spec: DenseSpec; inFeatures: number; inputRows: boolean; gatherOutput: boolean }
  | { index: number; kind: 'row'; spec: DenseSpec; inFeatures: number; scatterRows: boolean }
  /** an activation, dropout or flatten applied to `form`; `features` is the unsplit width */
  | { index: number; kind: 'elementwise'; spec: LayerSpec; form: ActivationForm; features: number; shardOf: number | null };

export interface ModelParallelPlan {
  begin: number;
  end: number;
  devices: number;
  layers: PlannedLayer[];
  /** the middle ends 'full' after a column layer: every device then keeps only its own rows */
  sliceRowsAtEnd: boolean;
}

const ELEMENTWISE = new Set<LayerSpec['type']>(['relu', 'tanh', 'sigmoid', 'clippedRelu', 'dropout', 'flatten']);

const layerName = (spec: LayerSpec, i: number) => `model.layers[${i}] ${spec.type}`;

/** Indices of the dense layers marked `parallel: model`. */
export function modelParallelLayers(spec: ModelSpec): number[] {
  return spec.layers.flatMap((l, i) => (l.type === 'dense' && l.parallel === 'model' ? [i] : []));
}

/** Why a strategy other than hybrid cannot run model-parallel layers, and the fix. */
export function modelParallelStrategyMessage(spec: ModelSpec, strategy: string): string {
  const first = modelParallelLayers(spec)[0];
  return `'parallel: model' (model.layers[${first}]) needs the synchronous hybrid strategy: the model-parallel layers exchange ` +
    `activations every step while the other layers all-reduce gradients; got ${strategy} — use strategy hybrid (--strategy hybrid) ` +
    `or remove 'parallel: model'`;
}

/**
 * The split of `spec` over `devices` devices, given the shape the layers before the first
 * model-parallel one produce (`entryShape`, per sample): it must be flat.
 */
export function planModelParallelFrom(spec: ModelSpec, devices: number, entryShape: readonly number[]): ModelParallelPlan {
  const begin = modelParallelLayers(spec)[0] ?? 0;
  if (entryShape.length !== 1) {
    throw new Error(`model.layers[${begin}] dense: expects a flat input but receives shape [${entryShape.join(', ')}]; add a flatten layer before it`);
  }
  return planModelParallel(spec, devices, entryShape[0]!);
}

/**
 * The split of `spec` over `devices` devices. `inFeatures` is the flat input width of layer `begin`
 * (what the data-parallel layers before it produce). Errors name the layer and the fix.
 */
export function planModelParallel(spec: ModelSpec, devices: number, inFeatures: number): ModelParallelPlan {
  const marked = modelParallelLayers(spec);
  if (!marked.length) throw new Error('planModelParallel: no dense layer is marked parallel: model');
  const begin = marked[0]!, end = marked[marked.length - 1]! + 1;
  const layers: PlannedLayer[] = [];
  let form: ActivationForm = 'rows', features = inFeatures, shardOf: number | null = null;
  for (let i = begin; i < end; i++) {
    const l = spec.layers[i]!;
    if (l.type === 'dense' && l.parallel === 'model') {
      if (form === 'shard') {
        layers.push({ index: i, kind: 'row', spec: l, inFeatures: features, scatterRows: i === end - 1 });
        form = i === end - 1 ? 'rows' : 'full';
        shardOf = null;
      } else {
        unitShards(l.units, devices, layerName(l, i));
        layers.push({ index: i, kind: 'column', spec: l, inFeatures: features, inputRows: form === 'rows', gatherOutput: i === end - 1 });
        form = i === end - 1 ? 'full' : 'shard';
        shardOf = i === end - 1 ? null : i;
      }
      features = l.units;
    } else if (ELEMENTWISE.has(l.type)) {
      layers.push({ index: i, kind: 'elementwise', spec: l, form, features, shardOf });
    } else {
      const between = `between the model-parallel dense layers model.layers[${begin}] and model.layers[${end - 1}]`;
      throw new Error(l.type === 'dense'
        ? `${layerName(l, i)}: lies ${between} but is not marked; add 'parallel: model' to it too, or move it after model.layers[${end - 1}]`
        : `${layerName(l, i)}: cannot lie ${between}; only activations, dropout and flatten can — move it before model.layers[${begin}] or after model.layers[${end - 1}]`);
    }
  }
  return { begin, end, devices, layers, sliceRowsAtEnd: form === 'full' };
}
