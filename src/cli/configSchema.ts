/**
 * The YAML form of a run configuration, as a zod schema that validates it and normalises it into
 * `RunConfig` (defaults filled in, sizes as [h, w], one-key maps turned into `{ type, ... }`).
 *
 * Every field carries its own human message ("expected a positive integer"); configErrors.ts adds
 * the file, the path and the value received.
 */
import { z } from 'zod';
import type { RunConfig, TrainSpec } from '../runtime/runConfig.ts';
import type {
  LayerSpec, Conv2DSpec, Pool2DSpec, DenseSpec, FlattenSpec, ActivationSpec, ClippedReluSpec, DropoutSpec,
  BatchNormSpec, ModelSpec, LossSpec, Padding, SpatialLayerSpec, SpatialSplitSpec,
} from '../nn/spec.ts';
import { SPATIAL_LAYER_TYPES } from '../nn/spec.ts';
import { jsBackend } from '../kernels/js/index.ts';
import { buildLayer, buildSpatialLayers } from '../nn/buildLayer.ts';
import type { OptimizerSpec, ScheduleSpec, DecaySpec } from '../optim/spec.ts';
import type { DataSpec } from '../data/spec.ts';
import { STRATEGY_NAMES, type StrategySpec, type StrategyName } from '../parallel/spec.ts';
import { stepsInLockstep, syncBatchNormStrategyMessage } from '../parallel/createStrategy.ts';
import { modelParallelLayers, modelParallelStrategyMessage } from '../parallel/modelParallel/plan.ts';
import type { ActivationKind } from '../kernels/backend.ts';
import { unknownKeyMessage, didYouMean, formatValue, type IssueParams } from './configErrors.ts';

// ---------------------------------------------------------------------------------------------
// Fields: one check, one message.

const isInt = (v: unknown): v is number => typeof v === 'number' && Number.isSafeInteger(v);
const isNum = (v: unknown): v is number => typeof v === 'number' && Number.isFinite(v);

function field<T>(check: (v: unknown) => boolean, expected: string) {
  return z.custom<T>((v) => check(v), { error: expected });
}

const posInt = () => field<number>((v) => isInt(v) && v > 0, 'expected a positive integer');
const nonNegInt = () => field<number>((v) => isInt(v) && v >= 0, 'expected an integer ≥ 0');
const posNum = () => field<number>((v) => isNum(v) && v > 0, 'expected a positive number');
const nonNegNum = () => field<number>((v) => isNum(v) && v >= 0, 'expected a number ≥ 0');
/** 0 ≤ v < 1 */
const unitRange = () => field<number>((v) => isNum(v) && v >= 0 && v < 1, 'expected a number ≥ 0 and < 1');
/** 0 < v < 1 */
const openUnit = () => field<number>((v) => isNum(v) && v > 0 && v < 1, 'expected a number > 0 and < 1');
/** 0 < v ≤ 1 */
const factor = () => field<number>((v) => isNum(v) && v > 0 && v <= 1, 'expected a number > 0 and ≤ 1');
const bool = () => field<boolean>((v) => typeof v === 'boolean', 'expected true or false');
const str = (what: string) => field<string>((v) => typeof v === 'string' && v.length > 0, `expected ${what}`);
const seedField = () => field<number>((v) => isInt(v) && v >= 0 && v <= 0xffffffff, 'expected an integer from 0 to 4294967295');

function oneOf<const T extends readonly string[]>(values: T) {
  return z.custom<T[number]>().superRefine((v, ctx) => {
    if (typeof v === 'string' && values.includes(v)) return;
    const hint = typeof v === 'string' ? didYouMean(v, values) : '';
    ctx.addIssue({ code: 'custom', message: `expected one of ${values.join(', ')}`, params: { hint } satisfies IssueParams });
  });
}

/** An integer or [h, w], normalised to [h, w]. */
function size2(name: string) {
  return field<number | [number, number]>(
    (v) => (isInt(v) && v > 0) || (Array.isArray(v) && v.length === 2 && v.every((x) => isInt(x) && x > 0)),
    `expected a positive integer or [height, width] of positive integers for ${name}`,
  );
}
const toPair = (v: number | [number, number]): [number, number] => (typeof v === 'number' ? [v, v] : [v[0], v[1]]);

const ACTIVATIONS = ['relu', 'clippedRelu', 'tanh', 'sigmoid', 'linear'] as const satisfies readonly ActivationKind[];
const PADDINGS = ['valid', 'same'] as const satisfies readonly Padding[];

// ---------------------------------------------------------------------------------------------
// Strict maps: unknown keys are errors that name the key and the allowed ones.

/**
 * A map whose keys are all known. `noun` names the keys in messages ("option", "section"),
 * `owner` names the map when it takes no keys at all ("flatten takes no options").
 */
function strict<S extends z.core.$ZodLooseShape>(shape: S, noun = 'option', owner?: string, example?: string) {
  const allowed = Object.keys(shape);
  return z.strictObject(shape, {
    error: (iss) => {
      if (iss.code === 'unrecognized_keys') return iss.keys.map((k) => unknownKeyMessage(k, allowed, noun, owner)).join('\n');
      if (iss.code === 'invalid_type') {
        return allowed.length
          ? `expected a map of ${noun}s (${allowed.join(', ')})${example ? ` such as ${example}` : ''}`
          : `expected {} (${owner ?? 'this'} takes no ${noun}s)`;
      }
      return undefined;
    },
  });
}

/** A section of the file that may be left out entirely (all its fields have defaults). */
function section<S extends z.core.$ZodLooseShape>(shape: S) {
  const obj = strict(shape, 'option');
  // every field has a default, so {} is a valid input (TypeScript cannot see that for a generic shape)
  return obj.prefault({} as z.input<typeof obj>);
}

// ---------------------------------------------------------------------------------------------
// One-key maps: `conv2d: { ... }`, `adam: { lr: 0.001 }`, `bmuf: { period: 4 }`, or a bare name.

interface OneKeyMapConfig<C extends Record<string, z.ZodType>> {
  /** what the key names, for messages: "layer type", "strategy", "optimizer" */
  noun: string;
  choices: C;
  /** a sample of the map form, for messages */
  example: string;
  /** why a name that is not a choice is refused here (a known layer in the wrong place), or undefined */
  refuse?: (name: string) => string | undefined;
}

function oneKeyMap<C extends Record<string, z.ZodType>>(cfg: OneKeyMapConfig<C>): z.ZodType<z.output<C[keyof C]>> {
  const names = Object.keys(cfg.choices);
  const list = names.join(', ');
  const fail = (ctx: z.core.$RefinementCtx, message: string) => {
    ctx.addIssue({ code: 'custom', message, params: { noGot: true } satisfies IssueParams });
    return z.NEVER;
  };
  return z.unknown().transform((v, ctx) => {
    let name: string;
    let opts: unknown;
    if (typeof v === 'string') {
      name = v;
      opts = {};
    } else if (v !== null && typeof v === 'object' && !Array.isArray(v)) {
      const keys = Object.keys(v);
      if (keys.length !== 1) {
        const hint = keys.length > 1 && keys.filter((k) => k in cfg.choices).length === 1
          ? ` (are the options of '${keys.find((k) => k in cfg.choices)}' indented under it?)`
          : '';
        return fail(ctx, `expected a one-key map naming the ${cfg.noun}, such as ${cfg.example}, got ${
          keys.length ? `${keys.length} keys (${keys.join(', ')})` : 'an empty map'}${hint}`);
      }
      name = keys[0]!;
      opts = (v as Record<string, unknown>)[name];
      if (opts === undefined || opts === null) opts = {};
    } else {
      return fail(ctx, `expected a ${cfg.noun} name or a one-key map such as ${cfg.example}, got ${formatValue(v)}`);
    }
    const refused = Object.hasOwn(cfg.choices, name) ? undefined : cfg.refuse?.(name);
    if (refused) return fail(ctx, refused);
    if (!Object.hasOwn(cfg.choices, name)) {
      return fail(ctx, `unknown ${cfg.noun} ${formatValue(name)}${didYouMean(name, names)}; expected one of ${list}`);
    }
    const r = cfg.choices[name]!.safeParse(opts);
    if (!r.success) {
      for (const iss of r.error.issues) ctx.addIssue({ ...iss, path: [name, ...iss.path] } as z.core.$ZodRawIssue);
      return z.NEVER;
    }
    return r.data as z.output<C[keyof C]>;
  });
}

// ---------------------------------------------------------------------------------------------
// Model

const conv2d = strict({
  filters: posInt(),
  kernelSize: size2('kernelSize'),
  strides: size2('strides').default(1),
  padding: oneOf(PADDINGS).default('valid'),
  activation: oneOf(ACTIVATIONS).default('linear'),
  useBias: bool().default(true),
  parallel: oneOf(['data', 'model'] as const).default('data'),
}).transform((o): Conv2DSpec => ({
  type: 'conv2d', filters: o.filters, kernelSize: toPair(o.kernelSize), strides: toPair(o.strides),
  padding: o.padding, activation: o.activation, useBias: o.useBias,
  // data-parallel is the absence of the field, so plain convolutions' specs stay as they were
  ...(o.parallel === 'model' ? { parallel: 'model' as const } : {}),
}));

function pool(type: Pool2DSpec['type']) {
  return strict({
    poolSize: size2('poolSize'),
    strides: size2('strides').optional(),
    padding: oneOf(PADDINGS).default('valid'),
  }).transform((o): Pool2DSpec => ({
    type, poolSize: toPair(o.poolSize), strides: toPair(o.strides ?? o.poolSize), padding: o.padding,
  }));
}

const PARALLEL_MODES = ['data', 'model'] as const;

const dense = strict({
  units: posInt(),
  activation: oneOf(ACTIVATIONS).default('linear'),
  useBias: bool().default(true),
  parallel: oneOf(PARALLEL_MODES).default('data'),
}).transform((o): DenseSpec => ({ type: 'dense', units: o.units, activation: o.activation, useBias: o.useBias, parallel: o.parallel }));

const noOptions = <T extends FlattenSpec | ActivationSpec>(type: T['type']) =>
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
  clippedRelu: strict({ cap: posNum().default(20) })
    .transform((o): ClippedReluSpec => ({ type: 'clippedRelu', cap: o.cap })),
  dropout: strict({ rate: unitRange(), masks: oneOf(['per-replica', 'per-sample'] as const).default('per-replica') })
    .transform((o): DropoutSpec => ({ type: 'dropout', rate: o.rate, masks: o.masks })),
  batchNorm: strict({ momentum: unitRange().default(0.9), epsilon: posNum().default(1e-5) })
    .transform((o): BatchNormSpec => ({ type: 'batchNorm', momentum: o.momentum, epsilon: o.epsilon })),
};

/** Why a layer type cannot be inside a spatialSplit, and the fix. */
function notSpatial(name: string): string | undefined {
  if (name === 'spatialSplit') return 'a spatialSplit cannot hold another spatialSplit; list all the layers to split in one spatialSplit';
  if (!Object.hasOwn(BASE_LAYERS, name)) return undefined;
  const why = name === 'batchNorm' ? 'its statistics span the whole image'
    : name === 'dropout' ? 'its masks are drawn per whole sample'
    : 'its outputs depend on the whole input, not on a window of pixels';
  return `${name} cannot be inside a spatialSplit (${why}); only ${SPATIAL_LAYER_TYPES.join(', ')} can — end the spatialSplit before this layer`;
}

const SPATIAL_CHOICES = {
  conv2d, maxPool2d: BASE_LAYERS.maxPool2d, avgPool2d: BASE_LAYERS.avgPool2d, relu: BASE_LAYERS.relu, tanh: BASE_LAYERS.tanh,
  sigmoid: BASE_LAYERS.sigmoid, clippedRelu: BASE_LAYERS.clippedRelu,
} satisfies Record<SpatialLayerSpec['type'], z.ZodType<SpatialLayerSpec>>;

const tilePair = field<[number, number]>(
  (v) => Array.isArray(v) && v.length === 2 && v.every((x) => isInt(x) && x > 0),
  'expected [rows, columns] of positive integers, such as [2, 1] for 2 tiles along the height',
);

const spatialSplit = strict({
  tiles: tilePair,
  parallel: oneOf(PARALLEL_MODES).default('data'),
  layers: z.array(oneKeyMap({ noun: 'layer type', choices: SPATIAL_CHOICES, example: '`conv2d: { filters: 8, kernelSize: 3 }`', refuse: notSpatial }),
    { error: 'expected a list of layers, each a one-key map such as `- conv2d: { filters: 8, kernelSize: 3 }`' })
    .min(1, { error: 'expected at least one layer (the convolutions and pooling to split)' }),
}).transform((o, ctx): SpatialSplitSpec => {
  o.layers.forEach((l, k) => {
    if (l.type !== 'conv2d' || l.parallel !== 'model') return;
    ctx.addIssue({
      code: 'custom', path: ['layers', k, 'conv2d', 'parallel'], params: { noGot: true } satisfies IssueParams,
      message: "'parallel: model' cannot be used on a layer inside a spatialSplit; to run the tiles on different devices put it on the spatialSplit itself (`spatialSplit: { tiles: [2, 1], parallel: model, layers: [...] }`), or move the convolution out of the spatialSplit",
    });
  });
  return {
    type: 'spatialSplit', tiles: [o.tiles[0], o.tiles[1]], layers: o.layers,
    // serial is the absence of the field, so serial splits' specs stay as they were
    ...(o.parallel === 'model' ? { parallel: 'model' as const } : {}),
  };
});

const LAYERS = { ...BASE_LAYERS, spatialSplit } satisfies Record<LayerSpec['type'], z.ZodType<LayerSpec>>;

export const LAYER_TYPES = Object.keys(LAYERS) as LayerSpec['type'][];

const layer = oneKeyMap({ noun: 'layer type', choices: LAYERS, example: '`dense: { units: 10 }`' });

const inputShape = field<number[]>(
  (v) => Array.isArray(v) && (v.length === 1 || v.length === 3) && v.every((x) => isInt(x) && x > 0),
  'expected [height, width, channels] or [features] of positive integers',
);

/**
 * `model.parallel: model` marks the whole model for the "one weird trick": every dense layer that
 * does not say otherwise gets `parallel: model` (a layer's own `parallel` wins).
 */
function withModelParallelDefault(raw: unknown): unknown {
  if (!raw || typeof raw !== 'object' || !('layers' in raw) || !Array.isArray(raw.layers)) return raw;
  const mode = (raw as { parallel?: unknown }).parallel;
  if (!PARALLEL_MODES.includes(mode as 'data')) return raw;
  const layers = raw.layers.map((l: unknown) => {
    if (!l || typeof l !== 'object' || !('dense' in l) || Object.keys(l).length !== 1) return l;
    const dense = (l as { dense: unknown }).dense;
    if (!dense || typeof dense !== 'object' || 'parallel' in dense) return l;
    return { dense: { ...dense, parallel: mode } };
  });
  return { ...raw, layers };
}

const model = z.preprocess(withModelParallelDefault, strict({
  input: inputShape,
  parallel: oneOf(PARALLEL_MODES).default('data'),
  layers: z.array(layer, { error: 'expected a list of layers, each a one-key map such as `- dense: { units: 10 }`' })
    .min(1, { error: 'expected at least one layer' }),
}, 'option', undefined, '{ input: [28, 28, 1], layers: [...] }')
  .transform((o, ctx): ModelSpec => {
    const spec: ModelSpec = { input: [...o.input], layers: o.layers };
    checkSpatialTiles(spec, ctx);
    return spec;
  }));

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
        for (const [tiles, size, what] of [[l.tiles[0], OH, 'rows'], [l.tiles[1], OW, 'columns']] as const) {
          if (tiles <= size) continue;
          ctx.addIssue({
            code: 'custom', path: ['layers', i, 'spatialSplit', 'tiles'], params: { noGot: true } satisfies IssueParams,
            message: `[${l.tiles.join(', ')}] asks for ${tiles} tiles along the ${what} but the split's output (${last.name}) ` +
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

// ---------------------------------------------------------------------------------------------
// Optimizer and schedule

const sgd = strict({
  lr: posNum(),
  momentum: unitRange().default(0),
  nesterov: bool().default(false),
  weightDecay: nonNegNum().default(0),
}).transform((o, ctx): OptimizerSpec => {
  if (o.nesterov && o.momentum === 0) {
    ctx.addIssue({
      code: 'custom', path: ['nesterov'], params: { noGot: true } satisfies IssueParams,
      message: 'nesterov: true needs momentum > 0; set momentum (e.g. 0.9) or nesterov: false',
    });
  }
  return { type: 'sgd', lr: o.lr, momentum: o.momentum, nesterov: o.nesterov, weightDecay: o.weightDecay };
});

function adamLike(type: 'adam' | 'adamw', weightDecay: number) {
  return strict({
    lr: posNum().default(0.001),
    beta1: unitRange().default(0.9),
    beta2: unitRange().default(0.999),
    eps: posNum().default(1e-8),
    weightDecay: nonNegNum().default(weightDecay),
  }).transform((o): OptimizerSpec => ({ type, lr: o.lr, beta1: o.beta1, beta2: o.beta2, eps: o.eps, weightDecay: o.weightDecay }));
}

const OPTIMIZERS = { sgd, adam: adamLike('adam', 0), adamw: adamLike('adamw', 0.01) } satisfies Record<OptimizerSpec['type'], z.ZodType<OptimizerSpec>>;
export const OPTIMIZER_TYPES = Object.keys(OPTIMIZERS) as OptimizerSpec['type'][];
const optimizer = oneKeyMap({ noun: 'optimizer', choices: OPTIMIZERS, example: '`adam: { lr: 0.001 }`' }).prefault('adam');

const DECAYS = {
  none: strict({}, 'option', 'none').transform((): DecaySpec => ({ type: 'none' })),
  step: strict({ every: posInt(), gamma: factor().default(0.1) }).transform((o): DecaySpec => ({ type: 'step', every: o.every, gamma: o.gamma })),
  cosine: strict({ minLr: nonNegNum().default(0) }).transform((o): DecaySpec => ({ type: 'cosine', minLr: o.minLr })),
} satisfies Record<DecaySpec['type'], z.ZodType<DecaySpec>>;

const schedule = section({
  warmupSteps: nonNegInt().default(0),
  decay: oneKeyMap({ noun: 'decay', choices: DECAYS, example: '`cosine: { minLr: 0 }`' }).prefault('none'),
}).transform((o): ScheduleSpec => ({ warmupSteps: o.warmupSteps, decay: o.decay }));

// ---------------------------------------------------------------------------------------------
// Data

const data = section({
  dataset: oneOf(['fashion-mnist'] as const).default('fashion-mnist'),
  dir: str('a directory path').optional(),
  batchSize: posInt().default(64),
  batchSizeScope: oneOf(['perDevice', 'global'] as const).default('perDevice'),
  shuffle: bool().default(true),
  trainLimit: posInt().optional(),
  testLimit: posInt().optional(),
}).transform((o): DataSpec => {
  const out: DataSpec = { dataset: o.dataset, batchSize: o.batchSize, batchSizeScope: o.batchSizeScope, shuffle: o.shuffle };
  if (o.dir !== undefined) out.dir = o.dir;
  if (o.trainLimit !== undefined) out.trainLimit = o.trainLimit;
  if (o.testLimit !== undefined) out.testLimit = o.testLimit;
  return out;
});

// ---------------------------------------------------------------------------------------------
// Train and strategies

const STRATEGIES = {
  sync: strict({}, 'option', 'sync').transform((): StrategySpec => ({ type: 'sync' })),
  async: strict({ fetchEvery: posInt().default(1), pushEvery: posInt().default(1), maxStaleness: nonNegInt().optional() })
    .transform((o): StrategySpec => {
      const s: StrategySpec = { type: 'async', fetchEvery: o.fetchEvery, pushEvery: o.pushEvery };
      if (o.maxStaleness !== undefined) s.maxStaleness = o.maxStaleness;
      return s;
    }),
  hybrid: strict({ bucketBytes: posInt().default(4 * 1024 * 1024) })
    .transform((o): StrategySpec => ({ type: 'hybrid', bucketBytes: o.bucketBytes })),
  bsp: strict({ period: posInt().default(1) }).transform((o): StrategySpec => ({ type: 'bsp', period: o.period })),
  easgd: strict({ alpha: openUnit().default(0.1), period: posInt().default(1), mode: oneOf(['sync', 'async'] as const).default('sync') })
    .transform((o): StrategySpec => ({ type: 'easgd', alpha: o.alpha, period: o.period, mode: o.mode })),
  bmuf: strict({ period: posInt().default(1), blockMomentum: unitRange().optional(), blockLr: posNum().default(1), nesterov: bool().default(false) })
    .transform((o): StrategySpec => {
      const s: StrategySpec = { type: 'bmuf', period: o.period, blockLr: o.blockLr, nesterov: o.nesterov };
      if (o.blockMomentum !== undefined) s.blockMomentum = o.blockMomentum;
      return s;
    }),
} satisfies Record<StrategyName, z.ZodType<StrategySpec>>;

// keep the order of STRATEGY_NAMES in messages
const orderedStrategies = Object.fromEntries(STRATEGY_NAMES.map((n) => [n, STRATEGIES[n]])) as typeof STRATEGIES;

export const strategySchema = oneKeyMap({ noun: 'strategy', choices: orderedStrategies, example: '`bmuf: { period: 4 }`' });

export const BACKENDS = ['js', 'wasm', 'native', 'auto'] as const;

const train = section({
  epochs: posInt().default(1),
  devices: posInt().default(1),
  strategy: strategySchema.prefault('hybrid'),
  seed: seedField().default(1),
  backend: oneOf(BACKENDS).default('auto'),
  lrScaling: oneOf(['none', 'linear'] as const).default('none'),
  evalEvery: nonNegInt().default(1),
  checkpointEvery: nonNegInt().default(0),
  microBatches: posInt().default(1),
  syncBatchNorm: bool().default(false),
}).transform((o): TrainSpec => ({
  epochs: o.epochs, devices: o.devices, strategy: o.strategy, seed: o.seed, backend: o.backend,
  lrScaling: o.lrScaling, evalEvery: o.evalEvery, checkpointEvery: o.checkpointEvery,
  microBatches: o.microBatches, syncBatchNorm: o.syncBatchNorm,
}));

// ---------------------------------------------------------------------------------------------
// The whole file

export const SECTIONS = ['model', 'loss', 'optimizer', 'schedule', 'data', 'train'] as const;

export const configSchema = strict({
  model,
  loss: oneOf(['softmaxCrossEntropy'] as const satisfies readonly LossSpec[]).default('softmaxCrossEntropy'),
  optimizer,
  schedule,
  data,
  train,
}, 'section', undefined, '`model: { input: [28, 28, 1], layers: [...] }`').transform((o, ctx): RunConfig => {
  // checks that involve more than one field
  if (o.data.batchSizeScope === 'global' && o.data.batchSize % o.train.devices !== 0) {
    ctx.addIssue({
      code: 'custom', path: ['data', 'batchSize'],
      message: `with batchSizeScope: global the batch is split across train.devices (${o.train.devices}), so it must be a multiple of ${o.train.devices}`,
    });
  }
  if (o.train.devices > 1 && o.train.strategy.type !== 'hybrid' && modelParallelLayers(o.model).length) {
    ctx.addIssue({
      code: 'custom', path: ['train', 'strategy'], params: { noGot: true } satisfies IssueParams,
      message: modelParallelStrategyMessage(o.model, o.train.strategy.type),
    });
  }
  if (o.train.devices > 1 && o.train.microBatches > 1 && modelParallelLayers(o.model).length) {
    ctx.addIssue({
      code: 'custom', path: ['train', 'microBatches'],
      message: `micro-batching is not supported together with model-parallel layers ('parallel: model') on several devices; use microBatches: 1 or make the layers data-parallel`,
    });
  }
  const perDevice = o.data.batchSizeScope === 'global' ? Math.floor(o.data.batchSize / o.train.devices) : o.data.batchSize;
  if (o.train.microBatches > perDevice) {
    ctx.addIssue({
      code: 'custom', path: ['train', 'microBatches'],
      message: `${o.train.microBatches} micro-batches of a per-device batch of ${perDevice} samples leaves some empty; use at most ${perDevice} (or a larger data.batchSize)`,
    });
  }
  // synchronised statistics need every device in the same forward pass at the same time
  if (o.train.syncBatchNorm && o.train.devices > 1 && !stepsInLockstep(o.train.strategy)) {
    ctx.addIssue({ code: 'custom', path: ['train', 'syncBatchNorm'], message: syncBatchNormStrategyMessage(o.train.strategy) });
  }
  return { model: o.model, loss: o.loss, optimizer: o.optimizer, schedule: o.schedule, data: o.data, train: o.train };
});

// Compile-time check: the schema produces exactly a RunConfig (and accepts any input).
type Assert<T extends true> = T;
type Equals<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
export type _ConfigSchemaProducesRunConfig = Assert<Equals<z.output<typeof configSchema>, RunConfig>>;
