/** Normalised strategy descriptions (defaults filled in, except those that depend on the device count). */
export type StrategySpec =
  | { type: 'sync' }
  /** bucketBytes: gradients are all-reduced in buckets of about this size as backward produces them */
  | { type: 'hybrid'; bucketBytes: number }
  | { type: 'async'; fetchEvery: number; pushEvery: number; maxStaleness?: number }
  | { type: 'bsp'; period: number }
  | { type: 'easgd'; alpha: number; period: number; mode: 'sync' | 'async' }
  | { type: 'bmuf'; period: number; blockMomentum?: number; blockLr: number; nesterov: boolean };

export type StrategyName = StrategySpec['type'];
export const STRATEGY_NAMES: readonly StrategyName[] = ['sync', 'async', 'hybrid', 'bsp', 'easgd', 'bmuf'];
