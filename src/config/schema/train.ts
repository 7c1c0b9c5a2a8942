/** The `train:` section: epochs, devices, the strategy and its options, …, normalised into `TrainSpec`. */
import type { z } from 'zod';
import type { TrainSpec } from '../runConfig.ts';
import type { OptimizerSpec } from '../../optim/spec.ts';
import { STRATEGIES, DEFAULT_STRATEGY, type StrategySpec, type StrategyName } from '../../parallel/strategies/index.ts';
import { bool, nonNegInt, oneKeyMap, oneOf, optionFields, posInt, posNum, section, seedField } from './fields.ts';
import { checkpointEveryField } from './checkpointEvery.ts';
import { bestField, earlyStoppingField } from './tracking.ts';
import { divergenceField } from './divergence.ts';
import { initFromField } from './initFrom.ts';
import { optimizerMap } from './optimizer.ts';
import { pipelineField } from './pipeline.ts';

/**
 * What `train.strategy` accepts when written in code: a strategy's options are its normalised
 * spec's fields, each optional (the schema fills in defaults); an optimizer among them (diloco's
 * `outer`) is written as `optimizer:` is.
 */
type StrategyOptionsInput<N extends StrategyName, S = Extract<StrategySpec, { type: N }>> = {
  [K in Exclude<keyof S, 'type'>]?: S[K] extends OptimizerSpec ? z.input<typeof optimizerMap> : S[K];
};

// every strategy's options, in the registry's order (the order messages list them)
const fields = { ...optionFields, optimizer: () => optimizerMap };
const strategyChoices = Object.fromEntries(STRATEGIES.map((e) => [e.name, e.schema(fields)])) as {
  [N in StrategyName]: z.ZodType<StrategySpec, StrategyOptionsInput<N>>;
};

export const strategySchema = oneKeyMap({
  noun: 'strategy',
  choices: strategyChoices,
  example: '`bmuf: { period: 4 }`',
});

export const BACKENDS = ['js', 'wasm', 'native', 'onednn', 'webgpu', 'auto'] as const;

export const trainSchema = section({
  epochs: posInt().default(1),
  devices: posInt().default(1),
  strategy: strategySchema.prefault(DEFAULT_STRATEGY),
  seed: seedField().default(1),
  backend: oneOf(BACKENDS).default('auto'),
  lrScaling: oneOf(['none', 'linear'] as const).default('none'),
  evalEvery: nonNegInt().default(1),
  checkpointEvery: checkpointEveryField().default(1),
  keepLast: posInt().default(3),
  microBatches: posInt().default(1),
  syncBatchNorm: bool().default(false),
  maxBadSteps: posInt().default(10),
  divergence: divergenceField(),
  stallWarningSeconds: posNum().default(60),
  clipGradNorm: posNum().optional(),
  initFrom: initFromField(),
  best: bestField(),
  earlyStopping: earlyStoppingField(),
  pipeline: pipelineField(),
  tensorParallel: posInt().optional(),
}).transform((o, ctx): TrainSpec => {
  if (o.earlyStopping && o.evalEvery === 0) {
    ctx.addIssue({
      code: 'custom',
      path: ['earlyStopping'],
      params: { noGot: true },
      message:
        'early stopping watches the evaluation after epochs, but train.evalEvery is 0 (only at the end); set evalEvery: 1 (or N) or leave earlyStopping out',
    });
  }
  return {
    epochs: o.epochs,
    devices: o.devices,
    strategy: o.strategy,
    seed: o.seed,
    backend: o.backend,
    lrScaling: o.lrScaling,
    evalEvery: o.evalEvery,
    checkpointEvery: o.checkpointEvery,
    keepLast: o.keepLast,
    microBatches: o.microBatches,
    syncBatchNorm: o.syncBatchNorm,
    maxBadSteps: o.maxBadSteps,
    divergence: o.divergence,
    stallWarningSeconds: o.stallWarningSeconds,
    best: o.best,
    earlyStopping: o.earlyStopping,
    // absent unless set, so configs without clipping normalise as before
    ...(o.clipGradNorm !== undefined ? { clipGradNorm: o.clipGradNorm } : {}),
    ...(o.initFrom !== undefined ? { initFrom: o.initFrom } : {}),
    ...(o.pipeline !== undefined ? { pipeline: o.pipeline } : {}),
    ...(o.tensorParallel !== undefined ? { tensorParallel: o.tensorParallel } : {}),
  };
});
