/**
 * Which strategies a simulation compares: paratrain's update rules by their registry names,
 * plus `trick` (hybrid with the model-parallel dense layers, "one weird trick"), each optionally
 * with options after colons: `bmuf:period=8:blockMomentum=0.5`, `async:fetchEvery=2`,
 * `trick:bucketBytes=1048576`. Options are checked by the config schema itself, so they take
 * the same values and give the same messages as in a config file; a bare name takes the config's
 * options when the config names that strategy, else the defaults.
 */
import { parseConfig, toYamlForm } from '../config/index.ts';
import type { RunConfig } from '../config/index.ts';
import type { StrategySpec } from '../parallel/strategies/index.ts';
import { DEFAULT_SIM_STRATEGIES, SIM_STRATEGY_NAMES, type SimStrategyKind } from './strategyNames.ts';

export { DEFAULT_SIM_STRATEGIES, SIM_STRATEGY_NAMES, type SimStrategyKind };

/** One strategy of a simulation, with its normalised options. */
export interface StrategyChoice {
  /** as written (`bmuf:period=8`), for tables and legends */
  label: string;
  kind: SimStrategyKind;
  /** the normalised options (the trick: hybrid's) */
  spec: StrategySpec;
}

function value(text: string): unknown {
  if (text === 'true') return true;
  if (text === 'false') return false;
  const n = Number(text);
  return text.trim() !== '' && Number.isFinite(n) ? n : text;
}

/** One `name:key=value:…` item, validated against `config`'s schema. */
export function parseStrategyChoice(item: string, config: RunConfig, flag = '--strategies'): StrategyChoice {
  const [name, ...opts] = item.trim().split(':');
  const kind = name as SimStrategyKind;
  if (!SIM_STRATEGY_NAMES.includes(kind)) {
    throw new Error(
      `${flag}: unknown strategy '${name}'; expected one of ${SIM_STRATEGY_NAMES.join(', ')} (options after colons, e.g. bmuf:period=8)`,
    );
  }
  const base = kind === 'trick' ? 'hybrid' : kind;
  const options: Record<string, unknown> = {};
  for (const o of opts) {
    const eq = o.indexOf('=');
    if (eq <= 0) throw new Error(`${flag}: '${item}': option '${o}' is not KEY=VALUE; write e.g. bmuf:period=8`);
    options[o.slice(0, eq)] = value(o.slice(eq + 1));
  }
  const y = toYamlForm(config) as { train: Record<string, unknown> };
  const configured = config.train.strategy.type === base;
  y.train.strategy = opts.length ? { [base]: options } : configured ? y.train.strategy : base;
  try {
    return { label: item.trim(), kind, spec: parseConfig(y, flag).train.strategy };
  } catch (e) {
    throw new Error(`${flag}: '${item}': ${(e as Error).message.replace(/^--strategies:\s*/, '')}`);
  }
}

/** A comma-separated list of choices (default: all of them). */
export function parseStrategyChoices(
  text: string | undefined,
  config: RunConfig,
  flag = '--strategies',
): StrategyChoice[] {
  const items = (text ?? DEFAULT_SIM_STRATEGIES)
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  if (!items.length) throw new Error(`${flag}: no strategy given; e.g. ${DEFAULT_SIM_STRATEGIES}`);
  return items.map((i) => parseStrategyChoice(i, config, flag));
}
