import { test } from 'node:test';
import assert from 'node:assert/strict';
import { loadConfig, parseConfig, parseYaml, configToYaml, toYamlForm } from '../../src/config/index.ts';
import type { RunConfig } from '../../src/config/runConfig.ts';
import { fileURLToPath } from 'node:url';

const example = (name: string) => fileURLToPath(new URL(`../../examples/${name}`, import.meta.url));

const defaults = {
  loss: { type: 'softmaxCrossEntropy', labelSmoothing: 0 },
  optimizer: { type: 'adam', lr: 0.001, beta1: 0.9, beta2: 0.999, eps: 1e-8, weightDecay: 0 },
  schedule: { warmupSteps: 0, decay: { type: 'none' } },
  data: { dataset: 'fashion-mnist', batchSize: 64, batchSizeScope: 'perDevice', shuffle: true },
} as const;

const conv = (filters: number) =>
  ({
    type: 'conv2d',
    filters,
    kernelSize: [3, 3],
    strides: [1, 1],
    padding: 'valid',
    activation: 'relu',
    useBias: true,
  }) as const;
const maxPool = { type: 'maxPool2d', poolSize: [2, 2], strides: [2, 2], padding: 'valid' } as const;
const dense = (units: number, activation: 'relu' | 'linear') =>
  ({ type: 'dense', units, activation, useBias: true, parallel: 'data' }) as const;
const train = {
  epochs: 2,
  devices: 1,
  strategy: { type: 'hybrid', bucketBytes: 4194304 },
  seed: 1,
  backend: 'auto',
  lrScaling: 'none',
  evalEvery: 1,
  checkpointEvery: 1,
  keepLast: 3,
  microBatches: 1,
  syncBatchNorm: false,
  maxBadSteps: 10,
  divergence: { factor: 100, steps: 50 },
  stallWarningSeconds: 60,
  best: 'auto',
  earlyStopping: false,
} as const;

test('examples/mnist-small.yaml parses to the network of docs/architecture.md', () => {
  const expected: RunConfig = {
    ...structuredClone(defaults),
    model: {
      input: [28, 28, 1],
      layers: [
        conv(32),
        maxPool,
        conv(64),
        maxPool,
        { type: 'flatten' },
        dense(128, 'relu'),
        { type: 'dropout', rate: 0.25, masks: 'per-replica' },
        dense(10, 'linear'),
      ],
    },
    schedule: { warmupSteps: 0, decay: { type: 'cosine', minLr: 0 } },
    train: { ...structuredClone(train), epochs: 10 },
  } as RunConfig;
  assert.deepStrictEqual(loadConfig(example('mnist-small.yaml')), expected);
});

test('examples/mlp.yaml parses to flatten-dense-dropout-dense', () => {
  const expected = {
    ...structuredClone(defaults),
    model: {
      input: [28, 28, 1],
      layers: [
        { type: 'flatten' },
        dense(256, 'relu'),
        { type: 'dropout', rate: 0.2, masks: 'per-replica' },
        dense(10, 'linear'),
      ],
    },
    train: structuredClone(train),
  } as RunConfig;
  assert.deepStrictEqual(loadConfig(example('mlp.yaml')), expected);
});

test('every option form normalises: sizes, pools, strategies, optimizers, schedules', () => {
  const c = parseConfig(
    parseYaml(
      `
model:
  input: [784]
  layers:
    - conv2d: { filters: 8, kernelSize: [3, 5], strides: 2, padding: same, useBias: false }
    - avgPool2d: { poolSize: [2, 2], strides: 1 }
    - maxPool2d: { poolSize: 3, padding: same }
    - batchNorm: {}
    - clippedRelu: {}
    - tanh: {}
    - sigmoid:
    - relu
    - flatten: {}
    - dense: { units: 10, parallel: data, activation: clippedRelu }
optimizer: { sgd: { lr: 0.1, momentum: 0.9, nesterov: true } }
schedule: { warmupSteps: 100, decay: { step: { every: 1000 } } }
data: { dir: /data/fm, batchSize: 256, batchSizeScope: global, shuffle: false, trainLimit: 1000, testLimit: 500 }
train: { devices: 4, strategy: { bmuf: { period: 8, blockMomentum: 0.9 } }, seed: 42, backend: js, lrScaling: linear, evalEvery: 0, checkpointEvery: 2 }
`,
      't.yaml',
    ),
    't.yaml',
  );
  assert.deepStrictEqual(c.model, {
    input: [784],
    layers: [
      {
        type: 'conv2d',
        filters: 8,
        kernelSize: [3, 5],
        strides: [2, 2],
        padding: 'same',
        activation: 'linear',
        useBias: false,
      },
      { type: 'avgPool2d', poolSize: [2, 2], strides: [1, 1], padding: 'valid' },
      { type: 'maxPool2d', poolSize: [3, 3], strides: [3, 3], padding: 'same' },
      { type: 'batchNorm', momentum: 0.9, epsilon: 1e-5 },
      { type: 'clippedRelu', cap: 20 },
      { type: 'tanh' },
      { type: 'sigmoid' },
      { type: 'relu' },
      { type: 'flatten' },
      { type: 'dense', units: 10, activation: 'clippedRelu', useBias: true, parallel: 'data' },
    ],
  });
  assert.deepStrictEqual(c.optimizer, { type: 'sgd', lr: 0.1, momentum: 0.9, nesterov: true, weightDecay: 0 });
  assert.deepStrictEqual(c.schedule, { warmupSteps: 100, decay: { type: 'step', every: 1000, gamma: 0.1 } });
  assert.deepStrictEqual(c.data, {
    dataset: 'fashion-mnist',
    dir: '/data/fm',
    batchSize: 256,
    batchSizeScope: 'global',
    shuffle: false,
    trainLimit: 1000,
    testLimit: 500,
  });
  assert.deepStrictEqual(c.train, {
    epochs: 1,
    devices: 4,
    strategy: { type: 'bmuf', period: 8, blockMomentum: 0.9, blockLr: 1, nesterov: false },
    seed: 42,
    backend: 'js',
    lrScaling: 'linear',
    evalEvery: 0,
    checkpointEvery: 2,
    keepLast: 3,
    microBatches: 1,
    syncBatchNorm: false,
    maxBadSteps: 10,
    divergence: { factor: 100, steps: 50 },
    stallWarningSeconds: 60,
    best: 'auto',
    earlyStopping: false,
  });
});

test('strategy and optimizer defaults, bare names and maps', () => {
  const base = { model: { input: [4], layers: [{ dense: { units: 2 } }] } };
  const strat = (s: unknown) => parseConfig({ ...base, train: { strategy: s } }).train.strategy;
  assert.deepStrictEqual(strat('sync'), { type: 'sync' });
  assert.deepStrictEqual(strat({ hybrid: {} }), { type: 'hybrid', bucketBytes: 4194304 });
  assert.deepStrictEqual(strat('async'), { type: 'async', fetchEvery: 1, pushEvery: 1 });
  assert.deepStrictEqual(strat({ async: { pushEvery: 4, maxStaleness: 0 } }), {
    type: 'async',
    fetchEvery: 1,
    pushEvery: 4,
    maxStaleness: 0,
  });
  assert.deepStrictEqual(strat({ bsp: { period: 5 } }), { type: 'bsp', period: 5 });
  assert.deepStrictEqual(strat('easgd'), { type: 'easgd', alpha: 0.1, period: 1, mode: 'sync' });
  assert.deepStrictEqual(strat({ easgd: { mode: 'async', alpha: 0.5 } }), {
    type: 'easgd',
    alpha: 0.5,
    period: 1,
    mode: 'async',
  });
  assert.deepStrictEqual(strat('bmuf'), { type: 'bmuf', period: 1, blockLr: 1, nesterov: false });
  const opt = (o: unknown) => parseConfig({ ...base, optimizer: o }).optimizer;
  assert.deepStrictEqual(opt('adamw'), {
    type: 'adamw',
    lr: 0.001,
    beta1: 0.9,
    beta2: 0.999,
    eps: 1e-8,
    weightDecay: 0.01,
  });
  assert.deepStrictEqual(opt({ adam: { lr: 0.01, weightDecay: 0.001 } }), {
    type: 'adam',
    lr: 0.01,
    beta1: 0.9,
    beta2: 0.999,
    eps: 1e-8,
    weightDecay: 0.001,
  });
  assert.deepStrictEqual(opt({ sgd: { lr: 0.5 } }), {
    type: 'sgd',
    lr: 0.5,
    momentum: 0,
    nesterov: false,
    weightDecay: 0,
  });
  const c = parseConfig(base);
  assert.deepStrictEqual(c.schedule, { warmupSteps: 0, decay: { type: 'none' } });
  assert.equal(c.train.epochs, 1);
  assert.deepStrictEqual(parseConfig({ ...base, schedule: { decay: 'cosine' } }).schedule.decay, {
    type: 'cosine',
    minLr: 0,
  });
  assert.deepStrictEqual(parseConfig({ ...base, schedule: { decay: { cosine: { minLr: 1e-5 } } } }).schedule.decay, {
    type: 'cosine',
    minLr: 1e-5,
  });
});

test('configToYaml writes a config that parses back to the same RunConfig', () => {
  for (const file of ['mnist-small.yaml', 'mlp.yaml']) {
    const c = loadConfig(example(file));
    assert.deepStrictEqual(parseConfig(parseYaml(configToYaml(c), 'round-trip'), 'round-trip'), c);
    assert.deepStrictEqual(parseConfig(toYamlForm(c)), c);
  }
  assert.match(configToYaml(loadConfig(example('mlp.yaml'))), /input: \[ 28, 28, 1 \]/);
});

test('the input object is not modified', () => {
  const raw = { model: { input: [4], layers: [{ dense: { units: 2 } }] } };
  const copy = structuredClone(raw);
  parseConfig(raw);
  assert.deepStrictEqual(raw, copy);
});

test('model.parallel: model marks every dense layer that does not say otherwise (the "one weird trick" per model)', () => {
  const layers = [
    { flatten: {} },
    { dense: { units: 32 } },
    { dropout: { rate: 0.5 } },
    { dense: { units: 10, parallel: 'data' } },
  ];
  const c = parseConfig({ model: { input: [28, 28, 1], parallel: 'model', layers } }, 'test');
  assert.deepEqual(
    c.model.layers.filter((l) => l.type === 'dense').map((l) => l.type === 'dense' && l.parallel),
    ['model', 'data'],
  );
  const plain = parseConfig({ model: { input: [28, 28, 1], layers } }, 'test');
  assert.ok(plain.model.layers.every((l) => l.type !== 'dense' || l.parallel === 'data'));
  assert.throws(
    () => parseConfig({ model: { input: [28, 28, 1], parallel: 'tensor', layers } }, 'test'),
    /^ConfigError: test: model\.parallel: expected one of data, model, got 'tensor'$/,
  );
});
