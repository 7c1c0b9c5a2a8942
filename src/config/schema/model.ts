/**
 * The `model:` section: the input shape and the layers, each a one-key map (`- dense: { units: 10 }`),
 * normalised into a `ModelSpec`.
 */
import { z } from 'zod';
import type {
  LayerSpec,
  Conv2DSpec,
  Pool2DSpec,
  DenseSpec,
  FlattenSpec,
  ActivationSpec,
  ClippedReluSpec,
  DropoutSpec,
  BatchNormSpec,
  ModelSpec,
  Padding,
  SpatialLayerSpec,
  SpatialSplitSpec,
  LeakyReluSpec,
  SoftmaxSpec,
} from '../../nn/spec.ts';
import { SPATIAL_LAYER_TYPES } from '../../nn/spec.ts';
import { jsBackend } from '../../kernels/js/index.ts';
import { buildLayer, buildSpatialLayers } from '../../nn/buildLayer.ts';
import type { ActivationKind } from '../../kernels/activation.ts';
import type { IssueParams } from '../errors.ts';
import {
  bool,
  field,
  isInt,
  nonNegNum,
  oneKeyMap,
  oneOf,
  posInt,
  posNum,
  size2,
  strict,
  toPair,
  unitRange,
} from './fields.ts';
import { modelInput, SEQUENCE_LAYERS } from './sequenceLayers.ts';
import { TRANSFORMER_LAYERS } from './transformerLayers.ts';
import { addBlockSchemas } from './addBlocks.ts';
import { EMBEDDING_LAYERS, tieEmbeddingSpecs } from './embeddingLayers.ts';

const ACTIVATIONS = [
  'relu',
  'clippedRelu',
  'tanh',
  'sigmoid',
  'linear',
  'gelu',
  'leakyRelu',
] as const satisfies readonly ActivationKind[];
const PADDINGS = ['valid', 'same'] as const satisfies readonly Padding[];

const conv2d = strict({
  filters: posInt(),
  kernelSize: size2('kernelSize'),
  strides: size2('strides').default(1),
  padding: oneOf(PADDINGS).default('valid'),
  activation: oneOf(ACTIVATIONS).default('linear'),
  useBias: bool().default(true),
  parallel: oneOf(['data', 'model'] as const).default('data'),
}).transform(
  (o): Conv2DSpec => ({
    type: 'conv2d',
    filters: o.filters,
    kernelSize: toPair(o.kernelSize),
    strides: toPair(o.strides),
    padding: o.padding,
    activation: o.activation,
    useBias: o.useBias,
    // data-parallel is the absence of the field, so plain convolutions' specs stay as they were
    ...(o.parallel === 'model' ? { parallel: 'model' as const } : {}),
  }),
);

function pool(type: Pool2DSpec['type']) {
  return strict({
    poolSize: size2('poolSize'),
    strides: size2('strides').optional(),
    padding: oneOf(PADDINGS).default('valid'),
  }).transform(
    (o): Pool2DSpec => ({
      type,
      poolSize: toPair(o.poolSize),
      strides: toPair(o.strides ?? o.poolSize),
      padding: o.padding,
    }),
  );
}

const PARALLEL_MODES = ['data', 'model'] as const;

const dense = strict({
  units: posInt(),
  activation: oneOf(ACTIVATIONS).default('linear'),
  useBias: bool().default(true),
  parallel: oneOf(PARALLEL_MODES).default('data'),
}).transform((o, ctx): DenseSpec => {
  // a tensor-parallel shard applies its activation in place, and gelu's backward needs the input
  if (o.parallel === 'model' && o.activation === 'gelu') {
    ctx.addIssue({
      code: 'custom',
      path: ['activation'],
      params: { noGot: true } satisfies IssueParams,
      message:
        "gelu cannot be fused into a 'parallel: model' dense layer; leave its activation linear and add a `- gelu: {}` layer after it",
    });
  }
  return { type: 'dense', units: o.units, activation: o.activation, useBias: o.useBias, parallel: o.parallel };
});

const noOptions = <T extends FlattenSpec | ActivationSpec | SoftmaxSpec>(type: T['type']) =>
  strict({}, 'option', type).transform((): T => ({ type }) as T);

const BASE_LAYERS = {
  conv2d,
  maxPool2d: pool('maxPool2d'),
  avgPool2d: pool('avgPool2d'),
  dense,
  flatten: noOptions<FlattenSpec>('flatten'),
  relu: noOptions<ActivationSpec>('relu'),
  tanh: noOptions<ActivationSpec>('tanh'),
  sigmoid: noOptions<ActivationSpec>('sigmoid'),
  clippedRelu: strict({ cap: posNum().default(20) }).transform(
    (o): ClippedReluSpec => ({ type: 'clippedRelu', cap: o.cap }),
  ),
  gelu: noOptions<ActivationSpec>('gelu'),
  leakyRelu: strict({ slope: nonNegNum().default(0.01) }).transform(
    (o): LeakyReluSpec => ({ type: 'leakyRelu', slope: o.slope }),
  ),
  softmax: noOptions<SoftmaxSpec>('softmax'),
  dropout: strict({
    rate: unitRange(),
    masks: oneOf(['per-replica', 'per-sample'] as const).default('per-replica'),
  }).transform((o): DropoutSpec => ({ type: 'dropout', rate: o.rate, masks: o.masks })),
  batchNorm: strict({ momentum: unitRange().default(0.9), epsilon: posNum().default(1e-5) }).transform(
    (o): BatchNormSpec => ({ type: 'batchNorm', momentum: o.momentum, epsilon: o.epsilon }),
  ),
};

/** Why a layer type cannot be inside a spatialSplit, and the fix. */
function notSpatial(name: string): string | undefined {
  if (name === 'spatialSplit')
    return 'a spatialSplit cannot hold another spatialSplit; list all the layers to split in one spatialSplit';
  if (name === 'residual' || name === 'add')
    return `a ${name} block cannot be inside a spatialSplit (nor a spatialSplit inside it); end the spatialSplit before the block`;
  if (!Object.hasOwn(BASE_LAYERS, name) && !Object.hasOwn(SEQUENCE_LAYERS, name)) return undefined;
  const why =
    name === 'batchNorm'
      ? 'its statistics span the whole image'
      : name === 'dropout'
        ? 'its masks are drawn per whole sample'
        : 'its outputs depend on the whole input, not on a window of pixels';
  return `${name} cannot be inside a spatialSplit (${why}); only ${SPATIAL_LAYER_TYPES.join(', ')} can — end the spatialSplit before this layer`;
}

const SPATIAL_CHOICES = {
  conv2d,
  maxPool2d: BASE_LAYERS.maxPool2d,
  avgPool2d: BASE_LAYERS.avgPool2d,
  relu: BASE_LAYERS.relu,
  tanh: BASE_LAYERS.tanh,
  sigmoid: BASE_LAYERS.sigmoid,
  clippedRelu: BASE_LAYERS.clippedRelu,
  gelu: BASE_LAYERS.gelu,
  leakyRelu: BASE_LAYERS.leakyRelu,
} satisfies Record<SpatialLayerSpec['type'], z.ZodType<SpatialLayerSpec>>;

const tilePair = field<[number, number]>(
  (v) => Array.isArray(v) && v.length === 2 && v.every((x) => isInt(x) && x > 0),
  'expected [rows, columns] of positive integers, such as [2, 1] for 2 tiles along the height',
);

const spatialSplit = strict({
  tiles: tilePair,
  parallel: oneOf(PARALLEL_MODES).default('data'),
  layers: z
    .array(
      oneKeyMap({
        noun: 'layer type',
        choices: SPATIAL_CHOICES,
        example: '`conv2d: { filters: 8, kernelSize: 3 }`',
        refuse: notSpatial,
      }),
      { error: 'expected a list of layers, each a one-key map such as `- conv2d: { filters: 8, kernelSize: 3 }`' },
    )
    .min(1, { error: 'expected at least one layer (the convolutions and pooling to split)' }),
}).transform((o, ctx): SpatialSplitSpec => {
  o.layers.forEach((l, k) => {
    if (l.type !== 'conv2d' || l.parallel !== 'model') return;
    ctx.addIssue({
      code: 'custom',
      path: ['layers', k, 'conv2d', 'parallel'],
      params: { noGot: true } satisfies IssueParams,
      message:
        "'parallel: model' cannot be used on a layer inside a spatialSplit; to run the tiles on different devices put it on the spatialSplit itself (`spatialSplit: { tiles: [2, 1], parallel: model, layers: [...] }`), or move the convolution out of the spatialSplit",
    });
  });
  return {
    type: 'spatialSplit',
    tiles: [o.tiles[0], o.tiles[1]],
    layers: o.layers,
    // serial is the absence of the field, so serial splits' specs stay as they were
    ...(o.parallel === 'model' ? { parallel: 'model' as const } : {}),
  };
});

// residual/add blocks hold layers themselves (not spatialSplit), layerNorm and attention among them (a
// hand-written pre-norm block): the schemas refer to each other lazily
const blocks = addBlockSchemas(
  { ...BASE_LAYERS, layerNorm: SEQUENCE_LAYERS.layerNorm, attention: TRANSFORMER_LAYERS.attention },
  ACTIVATIONS,
);

const LAYERS = {
  ...BASE_LAYERS,
  ...SEQUENCE_LAYERS,
  ...TRANSFORMER_LAYERS,
  spatialSplit,
  ...blocks,
  ...EMBEDDING_LAYERS,
} satisfies Record<LayerSpec['type'], z.ZodType<LayerSpec>>;

export const LAYER_TYPES = Object.keys(LAYERS) as LayerSpec['type'][];

const layer = oneKeyMap({ noun: 'layer type', choices: LAYERS, example: '`dense: { units: 10 }`' });

/**
 * `model.parallel: model` marks the whole model for the "one weird trick": every dense layer that
 * does not say otherwise gets `parallel: model` (a layer's own `parallel` wins) — or, in a model
 * with transformer blocks, every block (a model-parallel section holds blocks or dense layers, not both).
 */
function withModelParallelDefault(raw: unknown): unknown {
  if (!raw || typeof raw !== 'object' || !('layers' in raw) || !Array.isArray(raw.layers)) return raw;
  const mode = (raw as { parallel?: unknown }).parallel;
  if (!PARALLEL_MODES.includes(mode as 'data')) return raw;
  const one = (l: unknown): l is Record<string, unknown> => !!l && typeof l === 'object' && Object.keys(l).length === 1;
  const marks = raw.layers.some((l: unknown) => one(l) && 'transformerBlock' in l) ? 'transformerBlock' : 'dense';
  const layers = raw.layers.map((l: unknown) => {
    const body = one(l) ? l[marks] : undefined;
    if (!body || typeof body !== 'object' || 'parallel' in body) return l;
    return { [marks]: { ...body, parallel: mode } };
  });
  return { ...raw, layers };
}

const modelMap = strict(
  {
    input: modelInput,
    parallel: oneOf(PARALLEL_MODES).default('data'),
    layers: z
      .array(layer, { error: 'expected a list of layers, each a one-key map such as `- dense: { units: 10 }`' })
      .min(1, { error: 'expected at least one layer' }),
  },
  'option',
  undefined,
  '{ input: [28, 28, 1], layers: [...] }',
).transform((o, ctx): ModelSpec => {
  const spec: ModelSpec = { input: [...o.input], layers: tieEmbeddingSpecs(o.layers, ctx) };
  checkSpatialTiles(spec, ctx);
  return spec;
});

/** The `model:` section; its declared input is the map's (preprocessing accepts any value, as the map does). */
export const modelSchema = z.preprocess(withModelParallelDefault, modelMap) as unknown as z.ZodType<
  ModelSpec,
  z.input<typeof modelMap>
>;

/**
 * A spatialSplit grid must not have more tiles than its output has rows (columns). Shapes come from
 * building the layers (no weights are allocated); a model whose shapes do not fit is left to the
 * model builder, whose errors name the layer.
 */
function checkSpatialTiles(spec: ModelSpec, ctx: z.core.$RefinementCtx): void {
  if (!spec.layers.some((l) => l.type === 'spatialSplit')) return;
  let shape: readonly number[] = spec.input;
  for (const [i, l] of spec.layers.entries()) {
    try {
      if (l.type === 'spatialSplit') {
        const inner = buildSpatialLayers(jsBackend, l, i, shape);
        const last = inner[inner.length - 1]!;
        if (last.outputShape.length !== 3) return; // not an image: buildModel says so, naming the layer
        const [OH, OW] = last.outputShape as [number, number, number];
        for (const [tiles, size, what] of [
          [l.tiles[0], OH, 'rows'],
          [l.tiles[1], OW, 'columns'],
        ] as const) {
          if (tiles <= size) continue;
          ctx.addIssue({
            code: 'custom',
            path: ['layers', i, 'spatialSplit', 'tiles'],
            params: { noGot: true } satisfies IssueParams,
            message:
              `[${l.tiles.join(', ')}] asks for ${tiles} tiles along the ${what} but the split's output (${last.name}) ` +
              `has only ${size} ${what} (output ${last.outputShape.join('×')}); use at most ${size} tiles along the ${what}`,
          });
        }
        shape = last.outputShape;
      } else {
        shape = buildLayer(jsBackend, l, i, shape).outputShape;
      }
    } catch {
      return; // a shape error: buildModel reports it, naming the layer
    }
    if (shape.some((d) => d < 1)) return;
  }
}
