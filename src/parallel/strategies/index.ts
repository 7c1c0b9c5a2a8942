/**
 * The strategy registry: one list, from which the config schema (`train.strategy`), the factory,
 * the run checks and the command line's strategy names all derive. Adding a strategy is its own
 * file (schema, checks, factory: see entry.ts) and one line in STRATEGIES.
 */
import type { StrategyEntry, StrategyContext } from './entry.ts';
import type { Strategy } from '../strategy.ts';
import { syncEntry } from './sync.ts';
import { asyncEntry } from './async.ts';
import { hybridEntry } from './hybrid.ts';
import { bspEntry } from './bsp.ts';
import { easgdEntry } from './easgd.ts';
import { bmufEntry } from './bmuf.ts';
import { dilocoEntry } from './diloco.ts';

/** Every strategy, in the order messages and the command line list them. */
export const STRATEGIES = [syncEntry, asyncEntry, hybridEntry, bspEntry, easgdEntry, bmufEntry, dilocoEntry] as const;

type SpecOf<E> = E extends StrategyEntry<infer S> ? S : never;

/** Normalised strategy descriptions (defaults filled in, except those that depend on the device count). */
export type StrategySpec = SpecOf<(typeof STRATEGIES)[number]>;
export type StrategyName = StrategySpec['type'];
export const STRATEGY_NAMES: readonly StrategyName[] = STRATEGIES.map((e) => e.name);
/** `train.strategy` when the config leaves it out. */
export const DEFAULT_STRATEGY: StrategyName = 'hybrid';

export type { StrategyContext, StrategyEntry, OptionFields } from './entry.ts';

function entryOf(spec: StrategySpec): StrategyEntry<StrategySpec> {
  const entry = STRATEGIES.find((e) => e.name === spec.type);
  if (!entry) throw new Error(`unknown strategy '${spec.type}'; expected one of ${STRATEGY_NAMES.join(', ')}`);
  return entry as StrategyEntry<StrategySpec>;
}

/** Strategies whose weights live on a parameter server rather than in collectives. */
export function needsParameterServer(spec: StrategySpec): boolean {
  return entryOf(spec).needsParameterServer(spec);
}

/** Strategies that go on with the devices that remain when one dies (the rest fail the job). */
export function survivesLostDevices(spec: StrategySpec): boolean {
  return entryOf(spec).survivesLostDevices?.(spec) ?? false;
}

/** Strategies whose devices run every step together (collectives inside a step, e.g. synchronised BatchNorm, need it). */
export function stepsInLockstep(spec: StrategySpec): boolean {
  const { lockstep } = entryOf(spec);
  return typeof lockstep === 'boolean' ? lockstep : lockstep.test(spec);
}

/** The error for synchronised BatchNorm with a strategy whose devices run at their own pace. */
export function syncBatchNormStrategyMessage(spec: StrategySpec): string {
  // those that always step together, then those that do in some mode
  const always = STRATEGIES.filter((e) => e.lockstep === true).map((e) => e.name);
  const sometimes = STRATEGIES.flatMap((e) =>
    typeof e.lockstep === 'object' ? [`${e.name} with ${e.lockstep.when}`] : [],
  );
  return `syncBatchNorm needs devices that step together (${[...always, ...sometimes].join(', ')}); strategy ${spec.type} runs them at their own pace; use one of those or syncBatchNorm: false`;
}

/** Whether the strategy can run model-parallel layers (`parallel: model`). */
export function runsModelParallel(spec: StrategySpec): boolean {
  return entryOf(spec).modelParallel === true;
}

/** Checks the options that depend on the device count; errors name the config field and the fix. */
export function checkStrategy(spec: StrategySpec, devices: number): void {
  entryOf(spec).check?.(spec, devices);
}

/** The hooks one device of `ctx.comm` runs for `spec`. */
export function createStrategy(spec: StrategySpec, ctx: StrategyContext): Strategy {
  checkStrategy(spec, ctx.comm.size);
  const strategy = entryOf(spec).create(spec, ctx);
  // the server's state belongs in checkpoint sets whichever strategy uses it
  const ps = ctx.ps;
  if (ps) strategy.serverSnapshot = () => ps.snapshot();
  return strategy;
}
