/**
 * Configs written in code: `ConfigInput` is what a YAML file may hold, as a TypeScript type (from
 * the schema's input type, so editors complete and check every section, layer and option), and
 * `resolveConfig` turns either form — that, or an already validated `RunConfig` — into a RunConfig,
 * validating the first exactly as a YAML file is validated (same messages).
 */
import type { z } from 'zod';
import type { RunConfig } from './runConfig.ts';
import type { configSchema } from './schema/index.ts';
import type { DataInput } from './schema/data.ts';
import { parseConfig } from './load.ts';
import { toYamlForm } from './writeYaml.ts';
import { ConfigError } from './errors.ts';

/**
 * A run configuration as written in YAML or in code (`model`, `loss`, `optimizer`, `schedule`,
 * `data`, `train`; layers, optimizers, decays and strategies as one-key maps such as
 * `{ dense: { units: 10 } }` or a bare name such as `'flatten'`). Every field but `model` is optional.
 */
export interface ConfigInput extends SchemaInput {
  /** the dataset and batching (default: Fashion-MNIST, batches of 64); see docs/data.md */
  data?: DataInput;
}
// `data` is validated by a transform (one schema per dataset type), so its key is made optional here
type SchemaInput = Omit<z.input<typeof configSchema>, 'data'>;

/**
 * Returns `config` unchanged: it only gives an object literal the type `ConfigInput`, so an editor
 * completes and checks its fields. Validation happens when it is used (`train`), with the messages
 * a YAML file would get.
 */
export function defineConfig(config: ConfigInput): ConfigInput {
  return config;
}

const hasType = (v: unknown): boolean =>
  v !== null && typeof v === 'object' && typeof (v as { type?: unknown }).type === 'string';

/**
 * Whether `value` has the shape of a normalised RunConfig (what `loadConfig`/`parseConfig`
 * return): every section present, layers, optimizer and strategy as `{ type, ... }` objects.
 * A config in YAML form never has that shape (its layers are one-key maps).
 */
export function isRunConfig(value: unknown): value is RunConfig {
  if (value === null || typeof value !== 'object') return false;
  const c = value as Partial<Record<keyof RunConfig, unknown>>;
  const model = c.model as { layers?: unknown } | undefined;
  return (
    Array.isArray(model?.layers) &&
    model.layers.every(hasType) &&
    hasType(c.optimizer) &&
    hasType((c.schedule as { decay?: unknown } | undefined)?.decay) &&
    hasType((c.train as { strategy?: unknown } | undefined)?.strategy) &&
    c.data !== null &&
    typeof c.data === 'object' &&
    hasType(c.loss)
  );
}

/**
 * A validated RunConfig from a config in YAML form (checked like a YAML file, errors starting with
 * `sourceName`) or from a RunConfig (checked again through its YAML form, so a RunConfig edited in
 * code is held to the same rules).
 */
export function resolveConfig(config: ConfigInput | RunConfig, sourceName = 'config'): RunConfig {
  if (config === null || typeof config !== 'object' || Array.isArray(config)) {
    throw new ConfigError([
      `${sourceName}: expected a config object (model, optimizer, data, train, …) or a RunConfig from loadConfig(), got ${
        Array.isArray(config) ? 'an array' : config === null ? 'null' : typeof config
      }`,
    ]);
  }
  return parseConfig(isRunConfig(config) ? toYamlForm(config) : config, sourceName);
}
