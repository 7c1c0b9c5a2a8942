import type {
  Conv2DSpec,
  DenseSpec,
  LayerSpec,
  ModelSpec,
  SpatialSplitSpec,
  TransformerBlockSpec,
} from '../../nn/spec.ts';
import { shapeSize } from '../../tensor/shape.ts';
import { unitShards } from './tensorParallel.ts';

/**
 * Where "one weird trick" (Krizhevsky 2014) splits a model: layers [0, begin) run data-parallel (each
 * device its own samples, gradients all-reduced), layers [begin, end) tensor-parallel on every
 * device's samples at once, layers [end, n) data-parallel again. `begin` is the first and `end − 1`
 * the last layer (dense or conv2d) marked `parallel: model`.
 *
 * Inside, the activation between layers is one of
 *   'rows'  — this device's samples, all features (data-parallel; only where the section starts)
 *   'full'  — every device's samples, all features, the same on every device
 *   'shard' — every device's samples, this device's block of features
 * A model-parallel dense layer whose input is 'rows' or 'full' is column-parallel (output units
 * split → 'shard'); one whose input is 'shard' is row-parallel (input features split → 'full'),
 * so a column/row pair needs no communication in between (Megatron-LM). A model-parallel conv2d
 * is channel-split: its input is 'rows' or 'full' (images), each device computes its slice of the
 * filters, the slices are gathered → 'full'. A spatialSplit marked `parallel: model` takes 'rows' or
 * 'full' images too: each device computes its tiles of the stack, the tiles are gathered → 'full'
 * (its weights are replicated, so they stay in the data-parallel part). Activations, dropout and flatten act on any form,
 * pooling on 'full' images. The section ends in 'rows' for the data-parallel tail and the loss.
 *
 * Over sequences ([frames, features] samples, `frames`): a section of per-frame dense layers and
 * activations whose rows are (sample, frame) pairs — a device's rows are its samples' frames, every
 * sample padded to the step's longest (the same on every device), so the split is the same
 * tensor-parallel gemm over N·T rows; padded rows are computed but zeroed on the way out, and carry
 * no gradient in (what comes back from the data-parallel layers or the loss is 0 there).
 *
 * Transformer blocks marked `parallel: model` (Megatron-LM, Shoeybi et al. 2019) make a section
 * of their own: consecutive marked blocks, each taking and giving 'full' sequences [N, T, D] (the
 * first gathers the devices' rows), so blocks need no exchange in between; the section ends in
 * 'rows' through the usual exit (planTransformerSection).
 */

export type ActivationForm = 'rows' | 'full' | 'shard';

export type PlannedLayer =
  | { index: number; kind: 'column'; spec: DenseSpec; inFeatures: number; inputRows: boolean; gatherOutput: boolean }
  | { index: number; kind: 'row'; spec: DenseSpec; inFeatures: number; scatterRows: boolean }
  /** a channel-split conv2d on images [H, W, C] (`inputShape`), output channels gathered */
  | { index: number; kind: 'channel'; spec: Conv2DSpec; inputShape: readonly number[]; inputRows: boolean }
  /** a transformerBlock split Megatron-style (heads and MLP units), on 'full' sequences [N, T, D] */
  | {
      index: number;
      kind: 'transformer';
      spec: TransformerBlockSpec;
      inputShape: readonly number[];
      inputRows: boolean;
      mlp: number;
    }
  /** a spatialSplit whose tiles run on different devices, output tiles gathered */
  | { index: number; kind: 'spatial'; spec: SpatialSplitSpec; inputShape: readonly number[]; inputRows: boolean }
  /**
   * an activation, dropout, flatten or pooling applied to `form`; `features` is the unsplit width,
   * `inputShape` the unsplit per-sample shape
   */
  | {
      index: number;
      kind: 'elementwise';
      spec: LayerSpec;
      form: ActivationForm;
      features: number;
      shardOf: number | null;
      inputShape: readonly number[];
    };

export interface ModelParallelPlan {
  begin: number;
  end: number;
  devices: number;
  layers: PlannedLayer[];
  /** the section works on the frames of sequences: a row per (sample, frame), `features` per frame */
  frames: boolean;
  /** the middle ends 'full' after a column or channel layer: every device then keeps only its own rows */
  sliceRowsAtEnd: boolean;
}

const ELEMENTWISE = new Set<LayerSpec['type']>([
  'relu',
  'tanh',
  'sigmoid',
  'clippedRelu',
  'gelu',
  'leakyRelu',
  'dropout',
  'flatten',
]);
const POOLING = new Set<LayerSpec['type']>(['maxPool2d', 'avgPool2d']);

const layerName = (spec: LayerSpec, i: number) => `model.layers[${i}] ${spec.type}`;
const isMarked = (l: LayerSpec) =>
  (l.type === 'dense' || l.type === 'conv2d' || l.type === 'spatialSplit' || l.type === 'transformerBlock') &&
  l.parallel === 'model';

/** Indices of the layers (dense, conv2d, spatialSplit, transformerBlock) marked `parallel: model`. */
export function modelParallelLayers(spec: ModelSpec): number[] {
  return spec.layers.flatMap((l, i) => (isMarked(l) ? [i] : []));
}

/** Why a strategy other than hybrid cannot run model-parallel layers, and the fix. */
export function modelParallelStrategyMessage(spec: ModelSpec, strategy: string): string {
  const first = modelParallelLayers(spec)[0];
  return (
    `'parallel: model' (model.layers[${first}]) needs the synchronous hybrid strategy: the model-parallel layers exchange ` +
    `activations every step while the other layers all-reduce gradients; got ${strategy} — use strategy hybrid (--strategy hybrid) ` +
    `or remove 'parallel: model'`
  );
}

/**
 * The split of `spec` over `devices` devices. `inputShapes[i]` is layer i's per-sample input shape
 * in the unsplit model (the built layers give them). Errors name the layer and the fix.
 */
export function planModelParallelFrom(
  spec: ModelSpec,
  devices: number,
  inputShapes: readonly (readonly number[])[],
): ModelParallelPlan {
  const marked = modelParallelLayers(spec);
  if (!marked.length) throw new Error('planModelParallel: no layer is marked parallel: model');
  const begin = marked[0]!,
    end = marked[marked.length - 1]! + 1;
  if (marked.some((i) => spec.layers[i]!.type === 'transformerBlock'))
    return planTransformerSection(spec, devices, inputShapes, begin, end);
  const first = spec.layers[begin]!;
  const frames = first.type === 'dense' && inputShapes[begin]!.length === 2;
  if (first.type === 'dense' && inputShapes[begin]!.length !== 1 && !frames) {
    throw new Error(
      `model.layers[${begin}] dense: expects a flat input but receives shape [${inputShapes[begin]!.join(', ')}]; add a flatten layer before it`,
    );
  }
  // messages keep the dense-only wording where the section has no convolution
  const convs = marked.some((i) => spec.layers[i]!.type !== 'dense');
  const between = `between the model-parallel ${convs ? '' : 'dense '}layers model.layers[${begin}] and model.layers[${end - 1}]`;
  const layers: PlannedLayer[] = [];
  let form: ActivationForm = 'rows',
    shardOf: number | null = null;
  for (let i = begin; i < end; i++) {
    const l = spec.layers[i]!;
    // over frames, every layer of the section sees one frame's features per row
    const inputShape = frames ? inputShapes[i]!.slice(1) : inputShapes[i]!,
      features = shapeSize(inputShape);
    if (frames && l.type !== 'dense' && !ELEMENTWISE.has(l.type)) {
      throw new Error(
        `${layerName(l, i)}: cannot lie ${between} over the frames of a sequence; only per-frame dense layers and activations can — move it before model.layers[${begin}] or after model.layers[${end - 1}]`,
      );
    }
    if (frames && (l.type === 'dropout' || l.type === 'flatten')) {
      throw new Error(
        `${layerName(l, i)}: cannot lie ${between} over the frames of a sequence; only per-frame dense layers and activations can — move it after model.layers[${end - 1}]`,
      );
    }
    if (l.type === 'dense' && l.parallel === 'model') {
      if (form === 'shard') {
        layers.push({ index: i, kind: 'row', spec: l, inFeatures: features, scatterRows: i === end - 1 });
        form = i === end - 1 ? 'rows' : 'full';
        shardOf = null;
      } else {
        unitShards(l.units, devices, layerName(l, i));
        layers.push({
          index: i,
          kind: 'column',
          spec: l,
          inFeatures: features,
          inputRows: form === 'rows',
          gatherOutput: i === end - 1,
        });
        form = i === end - 1 ? 'full' : 'shard';
        shardOf = i === end - 1 ? null : i;
      }
    } else if (l.type === 'conv2d' && l.parallel === 'model') {
      if (form === 'shard') {
        throw new Error(
          `${layerName(l, i)}: cannot follow a column-parallel dense layer inside the model-parallel section; ` +
            `put the model-parallel convolutions before the model-parallel dense layers`,
        );
      }
      unitShards(l.filters, devices, layerName(l, i), 'filters');
      layers.push({ index: i, kind: 'channel', spec: l, inputShape, inputRows: form === 'rows' });
      form = 'full';
    } else if (l.type === 'spatialSplit' && l.parallel === 'model') {
      if (form === 'shard') {
        throw new Error(
          `${layerName(l, i)}: cannot follow a column-parallel dense layer inside the model-parallel section; ` +
            `put the model-parallel spatialSplit before the model-parallel dense layers`,
        );
      }
      layers.push({ index: i, kind: 'spatial', spec: l, inputShape, inputRows: form === 'rows' });
      form = 'full';
    } else if (ELEMENTWISE.has(l.type) || (POOLING.has(l.type) && form === 'full')) {
      layers.push({ index: i, kind: 'elementwise', spec: l, form, features, shardOf, inputShape });
    } else {
      throw new Error(
        l.type === 'dense' || l.type === 'conv2d' || l.type === 'spatialSplit'
          ? `${layerName(l, i)}: lies ${between} but is not marked; add 'parallel: model' to it too, or move it after model.layers[${end - 1}]`
          : `${layerName(l, i)}: cannot lie ${between}; only activations, dropout${convs ? ', flatten and pooling' : ' and flatten'} can — move it before model.layers[${begin}] or after model.layers[${end - 1}]`,
      );
    }
  }
  return { begin, end, devices, layers, frames, sliceRowsAtEnd: form === 'full' };
}

/**
 * A section of tensor-parallel transformer blocks [begin, end): every layer in it a marked block,
 * its heads and MLP units divisible by the device count (each device takes whole heads and an
 * equal block of units).
 */
function planTransformerSection(
  spec: ModelSpec,
  devices: number,
  inputShapes: readonly (readonly number[])[],
  begin: number,
  end: number,
): ModelParallelPlan {
  const between = `between the tensor-parallel transformer blocks model.layers[${begin}] and model.layers[${end - 1}]`;
  const layers: PlannedLayer[] = [];
  for (let i = begin; i < end; i++) {
    const l = spec.layers[i]!;
    if (l.type !== 'transformerBlock' || l.parallel !== 'model') {
      throw new Error(
        l.type === 'transformerBlock'
          ? `${layerName(l, i)}: lies ${between} but is not marked; add 'parallel: model' to it too`
          : `${layerName(l, i)}: cannot lie ${between}; only transformerBlocks marked 'parallel: model' can ` +
              `(a model-parallel section is either transformer blocks or dense/conv layers) — move it before model.layers[${begin}] or after model.layers[${end - 1}], or leave the ${l.type} layers data-parallel`,
      );
    }
    const inputShape = inputShapes[i]!,
      D = inputShape[inputShape.length - 1]!,
      mlp = l.mlp ?? 4 * D;
    const fits = (n: number) => [...Array(n).keys()].map((k) => k + 1).filter((g) => n % g === 0);
    if (l.heads % devices !== 0) {
      throw new Error(
        `${layerName(l, i)}: 'parallel: model' splits its ${l.heads} heads over ${devices} devices, but each device takes whole heads and as many as the others; ` +
          `use a device count that divides ${l.heads} (${fits(l.heads).join(', ')}), or heads: a multiple of ${devices}`,
      );
    }
    if (mlp % devices !== 0) {
      throw new Error(
        `${layerName(l, i)}: 'parallel: model' splits its MLP of ${mlp} units over ${devices} devices, which does not divide it; ` +
          `use mlp: a multiple of ${devices} (e.g. ${Math.ceil(mlp / devices) * devices}), or a device count that divides ${mlp}`,
      );
    }
    layers.push({ index: i, kind: 'transformer', spec: l, inputShape, inputRows: i === begin, mlp });
  }
  return { begin, end, devices, layers, frames: false, sliceRowsAtEnd: true };
}
