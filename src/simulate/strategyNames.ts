/**
 * The strategy names `paratrain simulate --strategies` takes, in a module of their own: the CLI's
 * help text needs them, and loading them must not load the config schema (choices.ts does).
 */
import { STRATEGY_NAMES, type StrategySpec } from '../parallel/strategies/index.ts';

/** A strategy the simulator knows: the registry's names and `trick`. */
export type SimStrategyKind = StrategySpec['type'] | 'trick';

/** Every strategy name `--strategies` accepts. */
export const SIM_STRATEGY_NAMES: readonly SimStrategyKind[] = [...STRATEGY_NAMES, 'trick'];
/** What `--strategies` means when left out: all of them. */
export const DEFAULT_SIM_STRATEGIES = SIM_STRATEGY_NAMES.join(',');
