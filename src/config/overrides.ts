/**
 * Command-line style overrides (`--epochs 3`, `--strategy bmuf`) applied to a config and validated
 * like a config file, problems named by the flag.
 */
import type { RunConfig } from './runConfig.ts';
import { validate } from './load.ts';
import { toYamlForm } from './writeYaml.ts';

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

/** Every ConfigOverrides key (checked against the interface at compile time). */
export const OVERRIDE_KEYS = [
  'epochs',
  'batchSize',
  'lr',
  'seed',
  'devices',
  'strategy',
  'backend',
  'dataDir',
] as const satisfies readonly (keyof ConfigOverrides)[];
type Assert<T extends true> = T;
export type _OverrideKeysComplete = Assert<keyof ConfigOverrides extends (typeof OVERRIDE_KEYS)[number] ? true : false>;

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
export function applyOverrides(
  config: RunConfig,
  overrides: ConfigOverrides,
  sourceName = 'command line',
  names: 'flags' | 'keys' = 'flags',
): RunConfig {
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
  // a problem is named by the flag (or, from the library, the option key) that caused it
  const label = (path: readonly PropertyKey[]): string | undefined => {
    if (path[0] === 'optimizer' && path[2] === 'lr' && o.lr !== undefined) return names === 'flags' ? '--lr' : 'lr';
    const key = path.map(String).join('.');
    const hit = FLAGS[key] ?? (key.startsWith('train.strategy.') ? FLAGS['train.strategy'] : undefined);
    return hit && o[hit[1]] !== undefined ? (names === 'flags' ? hit[0] : hit[1]) : undefined;
  };
  return validate(y, sourceName, { label });
}
