/**
 * Run configuration, as a library: load and validate YAML configs (`loadConfig`, `parseConfig`),
 * apply command-line style overrides (`applyOverrides`), write a config back as YAML
 * (`configToYaml`). Problems are thrown as one `ConfigError` listing them all.
 */
export type { RunConfig, TrainSpec } from './runConfig.ts';
export { loadConfig, parseConfig, parseYaml } from './load.ts';
export { applyOverrides, OVERRIDE_KEYS, type ConfigOverrides } from './overrides.ts';
export { configToYaml, toYamlForm } from './writeYaml.ts';
export { ConfigError } from './errors.ts';
export { LAYER_TYPES, OPTIMIZER_TYPES, BACKENDS } from './schema/index.ts';
export { defineConfig, resolveConfig, isRunConfig, type ConfigInput } from './inCode.ts';
