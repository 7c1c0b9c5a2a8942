/**
 * Which strategies a simulation compares: paratrain's update rules by their registry names,
 * plus `trick` (hybrid with the model-parallel dense layers, "one weird trick"), each optionally
 * with options after colons: `bmuf:period=8:blockMomentum=0.5`, `async:fetchEvery=2`,
 * `trick:bucketBytes=1048576`; `pipeline:stages=2:microBatches=8:schedule=1f1b`, hybrid over
 * pipelines (train.pipeline, train.microBatches); and `tensor:size=2`, the trick's layers split over
 * groups of 2 devices, the groups data-parallel (train.tensorParallel). Options are checked by the
 * config schema itself, so they take the same values and give the same messages as in a config
 * file; a bare name takes the config's options when the config names that strategy, else the defaults.
 */
import { parseConfig, toYamlForm } from '../config/index.ts';
import type { RunConfig } from '../config/index.ts';
import type { StrategySpec } from '../parallel/strategies/index.ts';
import { DEFAULT_SIM_STRATEGIES, SIM_STRATEGY_NAMES, type SimStrategyKind } from './strategyNames.ts';
import type { PipelineShape } from './pipelineSim.ts';
import { markForTrick, stripMarks } from './trick.ts';

export { DEFAULT_SIM_STRATEGIES, SIM_STRATEGY_NAMES, type SimStrategyKind };

/** One strategy of a simulation, with its normalised options. */
export interface StrategyChoice {
  /** as written (`bmuf:period=8`), for tables and legends */
  label: string;
  kind: SimStrategyKind | 'pipeline' | 'tensor';
  /** the normalised options (the trick, a pipeline, tensor groups: hybrid's) */
  spec: StrategySpec;
  /** a pipeline's stages, micro-batches and schedule */
  pipeline?: PipelineShape;
  /** train.tensorParallel: devices per tensor-parallel group */
  tensorParallel?: number;
}

const PIPELINE_KEYS = ['stages', 'microBatches', 'schedule'];

/**
 * `pipeline:stages=P[:microBatches=M][:schedule=S]`: the config with train.pipeline and
 * train.microBatches set, checked by its schema (hybrid the strategy, as a pipeline requires); left
 * out, they are the config's own pipeline's (its boundaries too), else 4 micro-batches and 1f1b.
 */
function pipelineChoice(
  item: string,
  config: RunConfig,
  options: Record<string, unknown>,
  flag: string,
): StrategyChoice {
  for (const k of Object.keys(options))
    if (!PIPELINE_KEYS.includes(k))
      throw new Error(`${flag}: '${item}': unknown pipeline option '${k}'; expected ${PIPELINE_KEYS.join(', ')}`);
  const own = config.train.pipeline;
  const stages = options.stages ?? own?.stages;
  if (stages === undefined)
    throw new Error(`${flag}: '${item}': give the stages, e.g. pipeline:stages=2:microBatches=8:schedule=1f1b`);
  // every layer data-parallel, as the simulator times the model (a pipeline refuses parallel: model)
  const y = toYamlForm({ ...config, model: stripMarks(config.model) }) as { train: Record<string, unknown> };
  const mine = own && own.stages === stages;
  y.train.pipeline = {
    stages,
    schedule: options.schedule ?? own?.schedule ?? '1f1b',
    ...(mine && own.boundaries ? { boundaries: own.boundaries } : {}),
  };
  y.train.microBatches = options.microBatches ?? (own ? config.train.microBatches : 4);
  const hybrid = config.train.strategy.type === 'hybrid' ? config.train.strategy.bucketBytes : undefined;
  y.train.strategy = hybrid === undefined ? 'hybrid' : { hybrid: { bucketBytes: hybrid } };
  // the schema checks a pipeline against a device count; the simulation checks each of its own
  y.train.devices = stages;
  try {
    const train = parseConfig(y, flag).train;
    const p = train.pipeline!;
    return {
      label: item.trim(),
      kind: 'pipeline',
      spec: train.strategy,
      pipeline: {
        stages: p.stages,
        schedule: p.schedule,
        microBatches: train.microBatches,
        ...(p.boundaries ? { boundaries: p.boundaries } : {}),
      },
    };
  } catch (e) {
    throw new Error(`${flag}: '${item}': ${(e as Error).message.replace(/^--strategies:\s*/, '')}`);
  }
}

/**
 * `tensor:size=g`: the trick's model (the config's `parallel: model` marks, else every dense layer)
 * with train.tensorParallel = g, checked by the schema on g devices (the simulation checks each of
 * its own counts); left out, the size is the config's tensorParallel.
 */
function tensorChoice(item: string, config: RunConfig, options: Record<string, unknown>, flag: string): StrategyChoice {
  for (const k of Object.keys(options))
    if (k !== 'size') throw new Error(`${flag}: '${item}': unknown tensor option '${k}'; expected size`);
  const size = options.size ?? config.train.tensorParallel;
  if (size === undefined)
    throw new Error(`${flag}: '${item}': give the devices per group, e.g. tensor:size=2 (train.tensorParallel)`);
  const y = toYamlForm({ ...config, model: markForTrick(config.model) }) as { train: Record<string, unknown> };
  y.train.tensorParallel = size;
  y.train.devices = typeof size === 'number' && size >= 2 ? 2 * size : 2;
  delete y.train.pipeline;
  delete y.train.microBatches;
  const hybrid = config.train.strategy.type === 'hybrid' ? config.train.strategy.bucketBytes : undefined;
  y.train.strategy = hybrid === undefined ? 'hybrid' : { hybrid: { bucketBytes: hybrid } };
  try {
    const train = parseConfig(y, flag).train;
    return { label: item.trim(), kind: 'tensor', spec: train.strategy, tensorParallel: train.tensorParallel! };
  } catch (e) {
    throw new Error(`${flag}: '${item}': ${(e as Error).message.replace(/^--strategies:\s*/, '')}`);
  }
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
  if (!SIM_STRATEGY_NAMES.includes(kind) && name !== 'pipeline' && name !== 'tensor') {
    throw new Error(
      `${flag}: unknown strategy '${name}'; expected one of ${SIM_STRATEGY_NAMES.join(', ')}, pipeline, tensor (options after colons, e.g. bmuf:period=8)`,
    );
  }
  const base = kind === 'trick' ? 'hybrid' : kind;
  const options: Record<string, unknown> = {};
  for (const o of opts) {
    const eq = o.indexOf('=');
    if (eq <= 0) throw new Error(`${flag}: '${item}': option '${o}' is not KEY=VALUE; write e.g. bmuf:period=8`);
    options[o.slice(0, eq)] = value(o.slice(eq + 1));
  }
  if (name === 'pipeline') return pipelineChoice(item, config, options, flag);
  if (name === 'tensor') return tensorChoice(item, config, options, flag);
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
