import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parseConfig } from '../../src/config/index.ts';
import type { RunConfig } from '../../src/config/runConfig.ts';
import type { Dataset } from '../../src/data/dataset.ts';
import type { TrainEvent } from '../../src/runtime/events/events.ts';
import { FaultPlan } from '../../src/runtime/faults/faultPlan.ts';
import { syntheticDataset, trainInMemory } from './inMemory.ts';
import { assertClose } from '../util/close.ts';

// Hybrid with G devices and batch b must equal one device with batch G·b for every new loss,
// with clipping, and for residual models (docs/architecture.md, "Equivalence is tested"). The runs
// differ only in float32 summation order, so after a few SGD-momentum steps weights agree to ~1e-6.
const TOL = { rtol: 1e-4, atol: 1e-5 };

function config(o: {
  input: number[];
  layers: unknown[];
  loss?: unknown;
  devices: number;
  batch: number;
  train?: Record<string, unknown>;
}): RunConfig {
  return parseConfig(
    {
      model: { input: o.input, layers: o.layers },
      ...(o.loss ? { loss: o.loss } : {}),
      optimizer: { sgd: { lr: 0.1, momentum: 0.9 } },
      data: { batchSize: o.batch },
      train: { epochs: 2, seed: 3, backend: 'js', evalEvery: 0, devices: o.devices, strategy: 'hybrid', ...o.train },
    },
    'test config',
  );
}

/** G = 2 with batch 8 against one device with batch 16; returns the single run's events and weights. */
async function assertTwoEqualOne(
  what: string,
  o: Omit<Parameters<typeof config>[0], 'devices' | 'batch'>,
  data: Dataset,
  bucketBytes?: number,
) {
  const single = await trainInMemory(config({ ...o, devices: 1, batch: 16 }), data);
  const hybrid = await trainInMemory(config({ ...o, devices: 2, batch: 8 }), data, null, { bucketBytes });
  assert.deepEqual([...hybrid.tensors.keys()].sort(), [...single.tensors.keys()].sort());
  for (const [name, t] of single.tensors)
    assertClose(hybrid.tensors.get(name)!, t, { ...TOL, what: `${what}: ${name}` });
  return { single, hybrid };
}

const steps = (events: TrainEvent[]) =>
  events.filter((e): e is Extract<TrainEvent, { type: 'step' }> => e.type === 'step');
const dense = (units: number, activation = 'linear') => ({ dense: { units, activation } });

test('hybrid on 2 devices equals one device with the 2× batch: meanSquaredError, binaryCrossEntropy, label-smoothed softmaxCrossEntropy', async () => {
  // 44 samples: the last global batch (12) splits 6/6, so uneven batches are in too
  const layers = (k: number) => [dense(8, 'gelu'), { leakyRelu: { slope: 0.1 } }, dense(k)];
  await assertTwoEqualOne(
    'meanSquaredError',
    { input: [6], layers: layers(2), loss: 'meanSquaredError' },
    syntheticDataset('regression', 44, [6], 2),
  );
  await assertTwoEqualOne(
    'binaryCrossEntropy',
    { input: [6], layers: layers(3), loss: { type: 'binaryCrossEntropy' } },
    syntheticDataset('multiLabel', 44, [6], 3),
  );
  await assertTwoEqualOne(
    'softmaxCrossEntropy ε=0.1',
    { input: [6], layers: layers(4), loss: { type: 'softmaxCrossEntropy', labelSmoothing: 0.1 } },
    syntheticDataset('classification', 44, [6], 4),
  );
});

test('clipGradNorm: hybrid clips the reduced gradient (2 devices equal one), reports the pre-clip norm, and changes the run', async () => {
  const o = {
    input: [6],
    layers: [dense(8, 'tanh'), dense(2)],
    loss: 'meanSquaredError',
    train: { clipGradNorm: 0.05 },
  };
  const data = syntheticDataset('regression', 40, [6], 2, 5);
  const { single, hybrid } = await assertTwoEqualOne('clipped', o, data);
  const norms = steps(single.events).map((e) => e.gradNorm!);
  assert.ok(norms.every((n) => Number.isFinite(n)) && norms.length === 6, 'every step reports gradNorm');
  assert.ok(
    norms.some((n) => n > 0.05),
    'the bound clips some steps (the test is not vacuous)',
  );
  // every device reports the norm of the same reduced gradient, equal to one device's
  const byStep = (events: TrainEvent[], rank: number) =>
    steps(events)
      .filter((e) => e.rank === rank)
      .map((e) => e.gradNorm!);
  assertClose(byStep(hybrid.events, 0), norms, { rtol: 1e-4, atol: 1e-6, what: 'gradNorm device 0 vs one device' });
  assertClose(byStep(hybrid.events, 1), byStep(hybrid.events, 0), {
    rtol: 0,
    atol: 0,
    what: 'gradNorm device 1 vs device 0',
  });
  const unclipped = await trainInMemory(config({ ...o, train: {}, devices: 1, batch: 16 }), data);
  assert.ok(
    steps(unclipped.events).every((e) => e.gradNorm === undefined),
    'no gradNorm without clipping',
  );
  const k = 'layers.0.kernel';
  assert.ok(
    unclipped.tensors.get(k)!.some((v, i) => Math.abs(v - single.tensors.get(k)![i]!) > 1e-4),
    'clipping changed the weights',
  );
});

const conv = (filters: number, kernelSize: number, strides = 1) => ({
  conv2d: { filters, kernelSize, strides, padding: 'same' },
});

test('residual blocks, gradients reduced in small buckets as backward goes (nested offsets): hybrid on 2 devices equals one device', async () => {
  const layers = [
    conv(3, 3),
    { residual: { layers: [conv(3, 3, 1), { leakyRelu: {} }, conv(3, 3)], activation: 'relu' } },
    {
      add: {
        branches: [[conv(5, 3, 2)], [conv(5, 1, 2), { tanh: {} }], [{ avgPool2d: { poolSize: 2 } }, conv(5, 1)]],
        activation: 'gelu',
      },
    },
    { flatten: {} },
    dense(3),
  ];
  // 200 bytes: every parametrised layer's gradient starts its own bucket
  await assertTwoEqualOne(
    'bucketed resnet',
    { input: [6, 6, 2], layers },
    syntheticDataset('classification', 40, [6, 6, 2], 3, 7),
    200,
  );
});

test('residual blocks with batchNorm (syncBatchNorm, nested layers synchronised): hybrid on 2 devices equals one device', async () => {
  const layers = [
    conv(4, 3),
    { residual: { layers: [conv(4, 3), { batchNorm: {} }, { relu: {} }, conv(4, 3)], activation: 'relu' } },
    {
      residual: {
        layers: [conv(6, 3, 2), { batchNorm: {} }, { gelu: {} }, conv(6, 3)],
        shortcut: [conv(6, 1, 2)],
        activation: 'relu',
      },
    },
    { avgPool2d: { poolSize: 3 } },
    { flatten: {} },
    dense(3),
  ];
  const { single } = await assertTwoEqualOne(
    'resnet',
    { input: [6, 6, 2], layers, train: { syncBatchNorm: true } },
    syntheticDataset('classification', 40, [6, 6, 2], 3, 9),
    1 << 30,
  );
  // nested tensors are named by their place in the block, BatchNorm statistics included
  for (const name of ['layers.1.layers.1.gamma', 'layers.2.shortcut.0.kernel'])
    assert.ok(single.tensors.has(name), name);
  assert.ok(
    [...single.tensors.keys()].some((n) => n.includes('layers.2.layers.1.running')),
    'nested running statistics are checkpointed',
  );
});

test("model-parallel layers with clipGradNorm (the shards' norm summed over the devices) and targets (each device its rows): 2 devices equal one", async () => {
  const layers = [
    dense(8, 'relu'),
    { dense: { units: 10, activation: 'tanh', parallel: 'model' } },
    { dense: { units: 4, parallel: 'model' } },
  ];
  await assertTwoEqualOne(
    'model-parallel clipped',
    { input: [6], layers, train: { clipGradNorm: 0.1 } },
    syntheticDataset('classification', 32, [6], 4, 11),
    1 << 30,
  );
  await assertTwoEqualOne(
    'model-parallel regression',
    { input: [6], layers, loss: 'meanSquaredError', train: { clipGradNorm: 0.1 } },
    syntheticDataset('regression', 36, [6], 4, 12),
    1 << 30,
  );
});

test('micro-batches carry their slice of the targets: 3 micro-batches equal the whole batch (MSE, BCE)', async () => {
  for (const [loss, task] of [
    ['meanSquaredError', 'regression'],
    ['binaryCrossEntropy', 'multiLabel'],
  ] as const) {
    const o = { input: [6], layers: [dense(8, 'tanh'), dense(3)], loss, devices: 1, batch: 16 };
    const data = syntheticDataset(task, 40, [6], 3, 13);
    const whole = await trainInMemory(config(o), data);
    const sliced = await trainInMemory(config({ ...o, train: { microBatches: 3 } }), data);
    for (const [name, t] of whole.tensors)
      assertClose(sliced.tensors.get(name)!, t, { ...TOL, what: `${loss} micro-batched: ${name}` });
  }
});

test('a non-finite step is skipped, not clipped: no gradNorm for it, the same on every device', async () => {
  const c = config({
    input: [6],
    layers: [dense(4, 'tanh'), dense(2)],
    loss: 'meanSquaredError',
    devices: 2,
    batch: 8,
    train: { clipGradNorm: 0.01, epochs: 1 },
  });
  const run = await trainInMemory(c, syntheticDataset('regression', 48, [6], 2), null, {
    faults: new FaultPlan({ nan: [[1, 1]] }),
  });
  for (const e of steps(run.events)) {
    if (e.step === 1)
      assert.ok(e.skipped && e.gradNorm === undefined, `device ${e.rank} step 1 skipped without a norm`);
    else assert.ok(!e.skipped && Number.isFinite(e.gradNorm), `device ${e.rank} step ${e.step} clipped`);
  }
});
