/**
 * YAML config → validated `RunConfig`.
 *
 * - `loadConfig(path)` reads and parses a YAML file;
 * - `parseConfig(object, sourceName)` validates an already-parsed object (YAML form);
 * - `applyOverrides(config, overrides)` applies command-line style overrides (`--epochs 3`);
 * - `configToYaml(config)` writes a RunConfig back in YAML form (parses back to the same config).
 *
 * Every problem is reported, one per line, as `<file>: <path>: <what is wrong>, got <value>`,
 * in a thrown `ConfigError`.
 */
import { readFileSync } from 'node:fs';
import { Document, LineCounter, isScalar, parseDocument, visit } from 'yaml';
import type { RunConfig } from '../runtime/runConfig.ts';
import type { LayerSpec } from '../nn/spec.ts';
import type { OptimizerSpec, DecaySpec } from '../optim/spec.ts';
import type { StrategySpec } from '../parallel/spec.ts';
import { configSchema } from './configSchema.ts';
import { ConfigError, formatIssues, type FormatOptions } from './configErrors.ts';

export { ConfigError } from './configErrors.ts';
export { LAYER_TYPES, OPTIMIZER_TYPES, BACKENDS } from './configSchema.ts';

/** Reads, parses and validates a YAML config file. Throws `ConfigError`. */
export function loadConfig(path: string): RunConfig {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') throw new ConfigError([`config file not found: ${path}`]);
    if (code === 'EISDIR') throw new ConfigError([`config file ${path} is a directory; expected a YAML file`]);
    throw new ConfigError([`cannot read config file ${path}: ${(e as Error).message}`]);
  }
  return parseConfig(parseYaml(text, path), path);
}

/** Parses YAML text into plain data; syntax errors become `file:line:col: ...` lines. */
export function parseYaml(text: string, sourceName: string): unknown {
  const lineCounter = new LineCounter();
  const doc = parseDocument(text, { lineCounter, prettyErrors: false, uniqueKeys: true });
  if (doc.errors.length > 0) {
    const lines = text.split(/\r?\n/);
    const issues: string[] = [];
    const details: string[] = [];
    for (const err of doc.errors) {
      const { line, col } = lineCounter.linePos(err.pos[0]);
      const msg = err.message.split('\n')[0]!.replace(/ at line \d+, column \d+:?$/, '');
      issues.push(`${sourceName}:${line}:${col}: YAML syntax error: ${msg}`);
      if (details.length === 0 && lines[line - 1] !== undefined) {
        details.push(`    ${lines[line - 1]}`, `    ${' '.repeat(Math.max(0, col - 1))}^`);
      }
    }
    throw new ConfigError(issues, details.join('\n'));
  }
  return doc.toJS({ maxAliasCount: 100 });
}

/**
 * Validates a config in YAML form (as parsed from YAML or written in code) and normalises it.
 * `sourceName` starts every error line (usually the file name).
 */
export function parseConfig(raw: unknown, sourceName = 'config'): RunConfig {
  return validate(raw, sourceName);
}

function validate(raw: unknown, sourceName: string, opts?: FormatOptions): RunConfig {
  const input = dropNullValues(raw);
  if (input === undefined) {
    throw new ConfigError([`${sourceName}: the config is empty; it needs at least a model section (model: { input: [28, 28, 1], layers: [...] })`]);
  }
  const r = configSchema.safeParse(input);
  if (r.success) return r.data;
  throw new ConfigError(formatIssues(r.error.issues, input, sourceName, opts));
}

/**
 * YAML writes an empty value (`flatten:`, `data:`) as null; treat a null map value as absent,
 * so `- flatten:` means `- flatten: {}` and an empty section means all defaults.
 */
function dropNullValues(v: unknown): unknown {
  if (v === null) return undefined;
  if (Array.isArray(v)) return v.map((x) => (x === null ? x : dropNullValues(x)));
  if (typeof v === 'object') {
    const out: Record<string, unknown> = {};
    for (const [k, x] of Object.entries(v as Record<string, unknown>)) {
      if (x !== null) out[k] = dropNullValues(x);
      else out[k] = undefined;
    }
    return out;
  }
  return v;
}

// ---------------------------------------------------------------------------------------------
// RunConfig → YAML form

/** The YAML form of a normalised config: `parseConfig(toYamlForm(c))` deep-equals `c`. */
export function toYamlForm(config: RunConfig): Record<string, unknown> {
  return {
    model: { input: [...config.model.input], layers: config.model.layers.map(layerToYaml) },
    loss: config.loss,
    optimizer: optimizerToYaml(config.optimizer),
    schedule: { warmupSteps: config.schedule.warmupSteps, decay: decayToYaml(config.schedule.decay) },
    data: { ...config.data },
    train: { ...config.train, strategy: strategyToYaml(config.train.strategy) },
  };
}

function oneKey<T extends { type: string }>(spec: T): Record<string, Record<string, unknown>> {
  const { type, ...rest } = spec;
  const opts: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(rest)) if (v !== undefined) opts[k] = Array.isArray(v) ? [...v] : v;
  return { [type]: opts };
}
const layerToYaml = (l: LayerSpec): Record<string, Record<string, unknown>> =>
  l.type === 'spatialSplit' ? { spatialSplit: { tiles: [...l.tiles], ...(l.parallel ? { parallel: l.parallel } : {}), layers: l.layers.map(layerToYaml) } } : oneKey(l);
const optimizerToYaml = (o: OptimizerSpec) => oneKey(o);
const decayToYaml = (d: DecaySpec) => oneKey(d);
const strategyToYaml = (s: StrategySpec) => oneKey(s);

/** The config as YAML text (e.g. to save the resolved config next to a run's metrics). */
export function configToYaml(config: RunConfig): string {
  const doc = new Document(toYamlForm(config));
  // `[3, 3]` and `{}` on one line, like people write them
  visit(doc, {
    Seq(_, node) { if (node.items.every((x) => isScalar(x))) node.flow = true; },
    Map(_, node) { if (node.items.length === 0) node.flow = true; },
  });
  return doc.toString();
}

// ---------------------------------------------------------------------------------------------
// Overrides

/** Command-line style overrides; numbers may be given as strings (`'3'`), as a CLI parser hands them over. */
export interface ConfigOverrides {
  epochs?: number | string;
  batchSize?: number | string;
  lr?: number | string;
  seed?: number | string;
  devices?: number | string;
  /** a bare strategy name; its options are the defaults (or those in the config, if it names the same strategy) */
  strategy?: string;
  backend?: string;
  dataDir?: string;
}

/** config path → [flag, override key] */
const FLAGS: Record<string, [string, keyof ConfigOverrides]> = {
  'train.epochs': ['--epochs', 'epochs'],
  'data.batchSize': ['--batch-size', 'batchSize'],
  'train.seed': ['--seed', 'seed'],
  'train.devices': ['--devices', 'devices'],
  'train.strategy': ['--strategy', 'strategy'],
  'train.backend': ['--backend', 'backend'],
  'data.dir': ['--data-dir', 'dataDir'],
};

function num(v: number | string): unknown {
  if (typeof v === 'string' && v.trim() !== '' && Number.isFinite(Number(v))) return Number(v);
  return v;
}

/**
 * A new RunConfig with the overrides applied and validated like a config file. Problems are reported
 * against the flag: `command line: --epochs: expected a positive integer, got 0`.
 */
export function applyOverrides(config: RunConfig, overrides: ConfigOverrides, sourceName = 'command line'): RunConfig {
  const y = toYamlForm(config) as {
    optimizer: Record<string, Record<string, unknown>>;
    data: Record<string, unknown>;
    train: Record<string, unknown>;
  };
  const o = overrides;
  if (o.epochs !== undefined) y.train.epochs = num(o.epochs);
  if (o.devices !== undefined) y.train.devices = num(o.devices);
  if (o.seed !== undefined) y.train.seed = num(o.seed);
  if (o.backend !== undefined) y.train.backend = o.backend;
  if (o.batchSize !== undefined) y.data.batchSize = num(o.batchSize);
  if (o.dataDir !== undefined) y.data.dir = o.dataDir;
  if (o.lr !== undefined) {
    const name = Object.keys(y.optimizer)[0]!;
    y.optimizer[name]!.lr = num(o.lr);
  }
  if (o.strategy !== undefined) {
    // same strategy as configured: keep its options; another one: its defaults
    y.train.strategy = o.strategy === config.train.strategy.type ? y.train.strategy : o.strategy;
  }
  const label = (path: readonly PropertyKey[]): string | undefined => {
    if (path[0] === 'optimizer' && path[2] === 'lr' && o.lr !== undefined) return '--lr';
    const key = path.map(String).join('.');
    const hit = FLAGS[key] ?? (key.startsWith('train.strategy.') ? FLAGS['train.strategy'] : undefined);
    return hit && o[hit[1]] !== undefined ? hit[0] : undefined;
  };
  return validate(y, sourceName, { label });
}
