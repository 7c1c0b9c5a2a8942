import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadConfig, parseConfig, parseYaml, ConfigError } from '../../src/config/index.ts';

/** The issue lines of the ConfigError thrown by parsing `yaml` as file `f.yaml`. */
function issuesOf(yaml: string): string[] {
  try {
    parseConfig(parseYaml(yaml, 'f.yaml'), 'f.yaml');
  } catch (e) {
    assert.ok(e instanceof ConfigError, `expected a ConfigError, got ${String(e)}`);
    assert.equal(e.message.split('\n').slice(0, e.issues.length).join('\n'), e.issues.join('\n'));
    return e.issues;
  }
  assert.fail('expected the config to be rejected');
}

const model = (layers: string) => `model:\n  input: [28, 28, 1]\n  layers:\n${layers}`;

test('negative kernelSize names the layer, the option and the value', () => {
  assert.deepStrictEqual(
    issuesOf(
      model(`
    - flatten: {}
    - dense: { units: 10 }
    - dropout: { rate: 0.1 }
    - conv2d: { filters: 32, kernelSize: -1 }
`),
    ),
    [
      'f.yaml: model.layers[3].conv2d.kernelSize: expected a positive integer or [height, width] of positive integers for kernelSize, got -1',
    ],
  );
});

test('a bad positive-integer field says so with the value', () => {
  assert.deepStrictEqual(issuesOf(model('    - dense: { units: -3 }\n')), [
    'f.yaml: model.layers[0].dense.units: expected a positive integer, got -3',
  ]);
  assert.deepStrictEqual(issuesOf(model('    - dense: { units: 2.5 }\n')), [
    'f.yaml: model.layers[0].dense.units: expected a positive integer, got 2.5',
  ]);
  assert.deepStrictEqual(issuesOf(model('    - dense: {}\n')), [
    'f.yaml: model.layers[0].dense.units: missing; expected a positive integer',
  ]);
});

test('unknown layer type lists the allowed ones', () => {
  assert.deepStrictEqual(
    issuesOf(model('    - flatten: {}\n    - dense: { units: 10 }\n    - conv3d: { filters: 3 }\n')),
    [
      "f.yaml: model.layers[2]: unknown layer type 'conv3d' (did you mean 'conv2d'?); expected one of conv2d, maxPool2d, avgPool2d, dense, flatten, relu, tanh, sigmoid, clippedRelu, gelu, leakyRelu, softmax, dropout, batchNorm, lstm, gru, conv1d, layerNorm, attention, transformerBlock, spatialSplit, residual, add, embedding, positionEncoding, tiedEmbedding",
    ],
  );
  assert.deepStrictEqual(issuesOf(model('    - perceptron: { units: 3 }\n')), [
    "f.yaml: model.layers[0]: unknown layer type 'perceptron'; expected one of conv2d, maxPool2d, avgPool2d, dense, flatten, relu, tanh, sigmoid, clippedRelu, gelu, leakyRelu, softmax, dropout, batchNorm, lstm, gru, conv1d, layerNorm, attention, transformerBlock, spatialSplit, residual, add, embedding, positionEncoding, tiedEmbedding",
  ]);
});

test('unknown option names the key, suggests a close match and lists the allowed ones', () => {
  assert.deepStrictEqual(issuesOf(model('    - conv2d: { filter: 32, kernelSize: 3 }\n')), [
    'f.yaml: model.layers[0].conv2d.filters: missing; expected a positive integer',
    "f.yaml: model.layers[0].conv2d: unknown option 'filter' (did you mean 'filters'?); allowed: filters, kernelSize, strides, padding, activation, useBias, parallel",
  ]);
  assert.deepStrictEqual(issuesOf(`${model('    - flatten: { axis: 1 }\n')}shedule: {}\ntrain: { epoch: 3 }\n`), [
    "f.yaml: model.layers[0].flatten: unknown option 'axis'; flatten takes no options",
    "f.yaml: train: unknown option 'epoch' (did you mean 'epochs'?); allowed: epochs, devices, strategy, seed, backend, lrScaling, evalEvery, checkpointEvery, keepLast, microBatches, syncBatchNorm, maxBadSteps, divergence, stallWarningSeconds, clipGradNorm, initFrom, best, earlyStopping, pipeline, tensorParallel",
    "f.yaml: unknown section 'shedule' (did you mean 'schedule'?); allowed: model, loss, optimizer, schedule, data, train",
  ]);
});

test('bad strategy names and options', () => {
  const base = model('    - dense: { units: 10 }\n');
  assert.deepStrictEqual(issuesOf(`${base}train: { strategy: { easgd: { alpha: 1.5, moed: async } } }\n`), [
    'f.yaml: train.strategy.easgd.alpha: expected a number > 0 and < 1, got 1.5',
    "f.yaml: train.strategy.easgd: unknown option 'moed' (did you mean 'mode'?); allowed: alpha, period, mode",
  ]);
  assert.deepStrictEqual(issuesOf(`${base}train: { strategy: { bmuf: { blockMomentum: 1 } } }\n`), [
    'f.yaml: train.strategy.bmuf.blockMomentum: expected a number ≥ 0 and < 1, got 1',
  ]);
  assert.deepStrictEqual(issuesOf(`${base}train: { strategy: downpour }\n`), [
    "f.yaml: train.strategy: unknown strategy 'downpour'; expected one of sync, async, hybrid, bsp, easgd, bmuf, diloco",
  ]);
  assert.deepStrictEqual(issuesOf(`${base}train: { strategy: { async: { maxStaleness: -1 } } }\n`), [
    'f.yaml: train.strategy.async.maxStaleness: expected an integer ≥ 0, got -1',
  ]);
  assert.deepStrictEqual(issuesOf(`${base}train: { strategy: { easgd: { mode: Sync } } }\n`), [
    "f.yaml: train.strategy.easgd.mode: expected one of sync, async, got 'Sync' (did you mean 'sync'?)",
  ]);
});

test('dropout rate must be below 1', () => {
  assert.deepStrictEqual(issuesOf(model('    - dropout: { rate: 1 }\n')), [
    'f.yaml: model.layers[0].dropout.rate: expected a number ≥ 0 and < 1, got 1',
  ]);
  assert.deepStrictEqual(issuesOf(model('    - dropout: { rate: 1.5 }\n')), [
    'f.yaml: model.layers[0].dropout.rate: expected a number ≥ 0 and < 1, got 1.5',
  ]);
});

test('every problem is listed, not just the first', () => {
  const issues = issuesOf(
    `${model('    - dense: { units: 0 }\n    - dropout: { rate: -1 }\n')}data: { batchSize: big }\ntrain: { devices: 0, backend: gpu }\n`,
  );
  assert.deepStrictEqual(issues, [
    'f.yaml: model.layers[0].dense.units: expected a positive integer, got 0',
    'f.yaml: model.layers[1].dropout.rate: expected a number ≥ 0 and < 1, got -1',
    "f.yaml: data.batchSize: expected a positive integer, got 'big'",
    'f.yaml: train.devices: expected a positive integer, got 0',
    "f.yaml: train.backend: expected one of js, wasm, native, onednn, webgpu, auto, got 'gpu'",
  ]);
});

test('structural mistakes: options not indented under the layer, empty layers, wrong shapes', () => {
  assert.deepStrictEqual(issuesOf(model('    - conv2d:\n      filters: 32\n')), [
    "f.yaml: model.layers[0]: expected a one-key map naming the layer type, such as `dense: { units: 10 }`, got 2 keys (conv2d, filters) (are the options of 'conv2d' indented under it?)",
  ]);
  assert.deepStrictEqual(issuesOf('model: { input: [28, 28, 1, 1], layers: [] }\n'), [
    'f.yaml: model.input: expected [height, width, channels], [features] or a sequence [frames, features] (frames null when variable) of positive integers, got [28, 28, 1, 1]',
    'f.yaml: model.layers: expected at least one layer, got []',
  ]);
  assert.deepStrictEqual(issuesOf('train: { epochs: 2 }\n'), [
    'f.yaml: model: missing; expected a map of options (input, parallel, layers) such as { input: [28, 28, 1], layers: [...] }',
  ]);
  assert.deepStrictEqual(issuesOf('- a\n'), [
    "f.yaml: expected a map of sections (model, loss, optimizer, schedule, data, train) such as `model: { input: [28, 28, 1], layers: [...] }`, got ['a']",
  ]);
  assert.deepStrictEqual(issuesOf(''), [
    'f.yaml: the config is empty; it needs at least a model section (model: { input: [28, 28, 1], layers: [...] })',
  ]);
  assert.deepStrictEqual(issuesOf(`${model('    - dense: { units: 10 }\n')}optimizer: sgd\n`), [
    'f.yaml: optimizer.sgd.lr: missing; expected a positive number',
  ]);
  assert.deepStrictEqual(
    issuesOf(`${model('    - dense: { units: 10 }\n')}optimizer: { sgd: { lr: 0.1, nesterov: true } }\n`),
    ['f.yaml: optimizer.sgd.nesterov: nesterov: true needs momentum > 0; set momentum (e.g. 0.9) or nesterov: false'],
  );
  assert.deepStrictEqual(
    issuesOf(
      `${model('    - dense: { units: 10 }\n')}data: { batchSize: 100, batchSizeScope: global }\ntrain: { devices: 3 }\n`,
    ),
    [
      'f.yaml: data.batchSize: with batchSizeScope: global the batch is split across train.devices (3), so it must be a multiple of 3, got 100',
    ],
  );
  assert.deepStrictEqual(
    issuesOf(`${model('    - dense: { units: 10 }\n')}data: { batchSize: 6 }\ntrain: { microBatches: 8 }\n`),
    [
      'f.yaml: train.microBatches: 8 micro-batches of a per-device batch of 6 samples leaves some empty; use at most 6 (or a larger data.batchSize), got 8',
    ],
  );
  assert.deepStrictEqual(issuesOf(`${model('    - dense: { units: 10 }\n')}train: { microBatches: 0 }\n`), [
    'f.yaml: train.microBatches: expected a positive integer, got 0',
  ]);
  assert.deepStrictEqual(
    issuesOf(`${model('    - dense: { units: 10 }\n')}train: { devices: 2, strategy: async, syncBatchNorm: true }\n`),
    [
      'f.yaml: train.syncBatchNorm: syncBatchNorm needs devices that step together (hybrid, bsp, bmuf, diloco, easgd with mode: sync); strategy async runs them at their own pace; use one of those or syncBatchNorm: false, got true',
    ],
  );
  assert.deepStrictEqual(
    issuesOf(`${model('    - dropout: { rate: 0.5, masks: per-batch }\n    - dense: { units: 10 }\n')}`),
    ["f.yaml: model.layers[0].dropout.masks: expected one of per-replica, per-sample, got 'per-batch'"],
  );
});

test('YAML syntax errors give file:line:col', () => {
  const bad = 'model:\n  input: [28, 28, 1]\n  layers:\n    - conv2d: filters: 32\n';
  assert.throws(
    () => parseYaml(bad, 'bad.yaml'),
    (e: unknown) => {
      assert.ok(e instanceof ConfigError);
      assert.deepStrictEqual(e.issues, [
        'bad.yaml:4:15: YAML syntax error: Nested mappings are not allowed in compact mappings',
      ]);
      assert.match(e.message, /\n {4} {4}- conv2d: filters: 32\n {4} {14}\^$/);
      return true;
    },
  );
  assert.throws(
    () => parseYaml('train:\n  epochs: 1\n  epochs: 2\n', 'dup.yaml'),
    (e: unknown) =>
      e instanceof ConfigError && e.issues[0] === 'dup.yaml:3:3: YAML syntax error: Map keys must be unique',
  );
});

test('loadConfig: missing file, syntax error in a file, bad value in a file', () => {
  const dir = mkdtempSync(join(tmpdir(), 'paratrain-config-'));
  try {
    const missing = join(dir, 'nope.yaml');
    assert.throws(
      () => loadConfig(missing),
      (e: unknown) => e instanceof ConfigError && e.message === `config file not found: ${missing}`,
    );
    const syntax = join(dir, 'syntax.yaml');
    writeFileSync(syntax, 'model:\n  input: [28, 28, 1\n');
    assert.throws(
      () => loadConfig(syntax),
      (e: unknown) =>
        e instanceof ConfigError &&
        e.issues.length >= 1 &&
        e.issues[0]!.startsWith(`${syntax}:`) &&
        /^.+:\d+:\d+: YAML syntax error: /.test(e.issues[0]!),
    );
    const value = join(dir, 'value.yaml');
    writeFileSync(value, 'model:\n  input: [28, 28, 1]\n  layers:\n    - dense: { units: 10 }\ntrain: { epochs: 0 }\n');
    assert.throws(
      () => loadConfig(value),
      (e: unknown) =>
        e instanceof ConfigError && e.message === `${value}: train.epochs: expected a positive integer, got 0`,
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
