/** The `train:` section: epochs, devices, the strategy and its options, …, normalised into `TrainSpec`. */
import type { z } from 'zod';
import type { TrainSpec } from '../runConfig.ts';
import { STRATEGY_NAMES, type StrategySpec, type StrategyName } from '../../parallel/spec.ts';
import { bool, nonNegInt, oneKeyMap, oneOf, openUnit, posInt, posNum, section, seedField, strict, unitRange } from './fields.ts';

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

export const trainSchema = section({
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
