/**
 * Configs written in TypeScript: `ConfigInput` is the schema's input type, so a typo in a section,
 * layer, option, optimizer or strategy is a compile error (the `@ts-expect-error` lines below fail
 * `npx tsc --noEmit` when they stop being errors), and `resolveConfig` validates an object like a
 * YAML file, with the same messages.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parse } from 'yaml';
import {
  defineConfig,
  parseConfig,
  parseYaml,
  resolveConfig,
  isRunConfig,
  ConfigError,
  loadConfig,
  type ConfigInput,
} from '../../src/config/index.ts';

const MLP = new URL('../../examples/mlp.yaml', import.meta.url).pathname;

const typed = defineConfig({
  model: {
    input: [28, 28, 1],
    layers: [
      { conv2d: { filters: 4, kernelSize: 3, activation: 'relu' } },
      { maxPool2d: { poolSize: 2 } },
      'flatten',
      { dense: { units: 10 } },
    ],
  },
  optimizer: { sgd: { lr: 0.1, momentum: 0.9 } },
  schedule: { warmupSteps: 2, decay: { cosine: { minLr: 0 } } },
  data: { batchSize: 32 },
  train: { epochs: 2, devices: 2, strategy: { bmuf: { period: 4 } }, checkpointEvery: { steps: 10 } },
});

// Compile-time checks: each line below must NOT type-check.
export const typos: ConfigInput[] = [
  // @ts-expect-error a misspelt layer option
  { model: { input: [4], layers: [{ dense: { unit: 3 } }] } },
  // @ts-expect-error an unknown layer type
  { model: { input: [4], layers: [{ dens: { units: 3 } }] } },
  // @ts-expect-error an unknown optimizer
  { model: { input: [4], layers: ['flatten'] }, optimizer: 'adamm' },
  // @ts-expect-error a misspelt strategy option
  { model: { input: [4], layers: ['flatten'] }, train: { strategy: { bmuf: { periods: 2 } } } },
  // @ts-expect-error a misspelt train field
  { model: { input: [4], layers: ['flatten'] }, train: { epoch: 1 } },
  // @ts-expect-error a value of the wrong type
  { model: { input: [4], layers: [{ dense: { units: '3' } }] } },
  // @ts-expect-error an activation that does not exist
  { model: { input: [4], layers: [{ dense: { units: 3, activation: 'relux' } }] } },
];

test('defineConfig returns its argument; resolveConfig normalises it exactly as parseConfig does', () => {
  assert.equal(defineConfig(typed), typed);
  const resolved = resolveConfig(typed);
  assert.deepStrictEqual(resolved, parseConfig(typed));
  assert.equal(resolved.train.strategy.type, 'bmuf');
  assert.deepStrictEqual(resolved.model.layers[2], { type: 'flatten' });
});

test('a RunConfig is accepted as well (checked again through its YAML form); the two forms are told apart', () => {
  const run = loadConfig(MLP);
  assert.ok(isRunConfig(run));
  assert.ok(!isRunConfig(typed));
  assert.deepStrictEqual(resolveConfig(run), run);
  // a RunConfig edited in code is held to the config's rules
  assert.throws(
    () => resolveConfig({ ...run, train: { ...run.train, epochs: 0 } }),
    /config: train\.epochs: expected a positive integer, got 0/,
  );
});

test('an object with mistakes gets the messages the same YAML file gets', () => {
  const text = `model:
  input: [28, 28, 1]
  layers:
    - dense: { unit: 10 }
    - conv3d: { filters: 2 }
train: { epoch: 1, strategy: { bmuf: { periods: 2 } } }
`;
  const messages = (f: () => unknown, source: string) => {
    try {
      f();
    } catch (e) {
      assert.ok(e instanceof ConfigError);
      return e.issues.map((l) => {
        assert.ok(l.startsWith(`${source}: `), l);
        return l.slice(source.length + 2);
      });
    }
    assert.fail('expected a ConfigError');
  };
  const fromYaml = messages(() => parseConfig(parseYaml(text, 'f.yaml'), 'f.yaml'), 'f.yaml');
  const fromObject = messages(() => resolveConfig(parse(text) as ConfigInput), 'config');
  assert.deepStrictEqual(fromObject, fromYaml);
  assert.ok(
    fromObject.some((m) => m.includes("unknown option 'unit' (did you mean 'units'?)")),
    fromObject.join('\n'),
  );
  assert.ok(
    fromObject.some((m) => m.includes("unknown option 'epoch' (did you mean 'epochs'?)")),
    fromObject.join('\n'),
  );
});

test('something that is not a config object is one clear error', () => {
  assert.throws(() => resolveConfig(null as unknown as ConfigInput), /config: expected a config object .*got null/);
  assert.throws(() => resolveConfig([] as unknown as ConfigInput), /got an array/);
  assert.throws(() => resolveConfig({} as ConfigInput), /config: model: missing/);
});
