import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { jsBackend } from '../../src/kernels/js/index.ts';
import { runDevice } from '../../src/runtime/job/deviceRun.ts';
import { loadData, train } from '../../src/runtime/run/train.ts';
import { readCheckpoint } from '../../src/runtime/checkpoint/checkpoint.ts';
import { hybridStrategy } from '../../src/parallel/strategies/hybrid.ts';
import { localStrategy } from '../../src/parallel/strategy.ts';
import { parseConfig, ConfigError } from '../../src/config/index.ts';
import type { RunConfig } from '../../src/config/runConfig.ts';
import type { TrainEvent } from '../../src/runtime/events/events.ts';
import { tinyConfig } from './helpers.ts';
import { localGroup } from './localGroup.ts';
import { assertClose } from '../util/close.ts';

// "One weird trick" on G devices must equal ONE device training on the G·b batch: same samples,
// same dropout masks (keyed by global sample index and unsplit feature index), same update. The runs
// differ only in float32 summation order (gradients summed over devices and shards in pieces), so
// after ~10 steps of SGD with momentum or Adam weights and optimizer state agree to ~1e-6; we allow
// rtol 1e-4 with atol 1e-5 (Adam's v can be tiny, and its updates amplify rounding slightly).
const TOL = { rtol: 1e-4, atol: 1e-5 };

/** Every tensor of a checkpoint (weights, statistics, optimizer state) by name. */
function tensorsOf(path: string): Map<string, Float32Array> {
  return new Map([...readCheckpoint(path).tensors].map(([name, t]) => [name, t.data]));
}

/**
 * Trains `config` with its devices in THIS thread (in-process collectives, js backend, hybrid with
 * one gradient bucket) or, with devices 1, as one device; returns rank 0's checkpoint tensors.
 */
async function trainInProcess(config: RunConfig): Promise<Map<string, Float32Array>> {
  const data = await loadData(config);
  const checkpoint = join(mkdtempSync(join(tmpdir(), 'paratrain-trick-')), 'model.safetensors');
  const G = config.train.devices;
  const events: TrainEvent[] = [];
  const base = {
    config,
    worldSize: G,
    backend: jsBackend,
    train: data.train,
    test: null,
    emit: (e: TrainEvent) => events.push(e),
    shared: false,
  };
  if (G === 1) await runDevice({ ...base, rank: 0, strategy: localStrategy, checkpointPath: checkpoint });
  else {
    await Promise.all(
      localGroup(G).map((comm) =>
        runDevice({
          ...base,
          rank: comm.rank,
          comm,
          strategy: hybridStrategy(comm, 1 << 30),
          checkpointPath: comm.rank === 0 ? checkpoint : null,
        }),
      ),
    );
  }
  return tensorsOf(checkpoint);
}

function assertSameModel(actual: Map<string, Float32Array>, expected: Map<string, Float32Array>, what: string): void {
  assert.deepStrictEqual([...actual.keys()].sort(), [...expected.keys()].sort(), `${what}: the same tensors`);
  for (const [name, data] of expected) assertClose(actual.get(name)!, data, { ...TOL, what: `${what} ${name}` });
}

const conv = [
  { conv2d: { filters: 4, kernelSize: 3, strides: 2, activation: 'relu' } },
  { maxPool2d: { poolSize: 2 } },
  { flatten: {} },
];

/** The trick on `devices` devices and one device with the whole batch, same everything else. */
async function compare(
  layers: unknown[],
  devices: number,
  optimizer: unknown,
  data: Record<string, unknown>,
  what: string,
): Promise<void> {
  const common = { layers, optimizer, train: { epochs: 2, backend: 'js' } };
  const single = await trainInProcess(tinyConfig({ ...common, data: { ...data, batchSize: 8 * devices } }));
  const trick = await trainInProcess(
    tinyConfig({ ...common, data, train: { ...common.train, devices, strategy: 'hybrid' } }),
  );
  assertSameModel(trick, single, what);
  // not vacuous: training moved the model-parallel weights away from their initial values
  const fresh = await trainInProcess(
    tinyConfig({
      ...common,
      data: { ...data, batchSize: 8 * devices, trainLimit: 1 },
      train: { ...common.train, epochs: 1 },
    }),
  );
  const first = layers.findIndex((l) => (l as { dense?: { parallel?: string } }).dense?.parallel === 'model');
  const k = `layers.${first}.kernel`;
  assert.ok(
    single.get(k)!.some((v, i) => Math.abs(v - fresh.get(k)![i]!) > 1e-3),
    `${what}: ${k} changed in training`,
  );
}

// 91 samples: the last global batch is short and splits unevenly (G=2: 6,5; G=3: 7,6,6; G=4: 7,7,7,6);
// 13 hidden units split 7,6 / 5,4,4 / 4,3,3,3.
const pair = [
  ...conv,
  { dense: { units: 13, activation: 'relu', parallel: 'model' } },
  { dropout: { rate: 0.3, masks: 'per-sample' } },
  { dense: { units: 10, parallel: 'model' } },
];

for (const devices of [2, 3, 4]) {
  test(`trick on ${devices} devices (column→row pair, uneven shards and rows, dropout on) equals one device on the ${devices}·b batch: SGD and Adam`, async () => {
    await compare(pair, devices, { sgd: { lr: 0.05, momentum: 0.9 } }, { trainLimit: 91 }, `G=${devices} sgd`);
    await compare(pair, devices, { adam: { lr: 0.01 } }, { trainLimit: 91 }, `G=${devices} adam`);
  });
}

test('trick with three model-parallel layers (column, row, column + gather) and a data-parallel tail equals one device', async () => {
  const layers = [
    ...conv,
    { dense: { units: 12, activation: 'relu', parallel: 'model' } },
    { dropout: { rate: 0.2, masks: 'per-sample' } },
    { dense: { units: 9, activation: 'tanh', parallel: 'model' } },
    { dropout: { rate: 0.2, masks: 'per-sample' } },
    { dense: { units: 7, activation: 'relu', parallel: 'model' } },
    { dropout: { rate: 0.2, masks: 'per-sample' } },
    { dense: { units: 10 } },
  ];
  await compare(layers, 3, { adam: { lr: 0.01 } }, { trainLimit: 91 }, 'G=3 three layers');
});

test('trick where some devices get no samples of the last batch, and where the first layer is model-parallel', async () => {
  // 97 = 3·32 + 1: the last step's single sample is device 0's; devices 1–3 still take part
  await compare(pair, 4, { sgd: { lr: 0.05, momentum: 0.9 } }, { trainLimit: 97 }, 'G=4 empty devices');
  const mlp = [
    { flatten: {} },
    { dense: { units: 16, activation: 'relu', parallel: 'model' } },
    { dense: { units: 10, parallel: 'model' } },
  ];
  await compare(mlp, 2, { sgd: { lr: 0.05 } }, { trainLimit: 40 }, 'G=2 MLP');
});

test('errors: more devices than units, layers that cannot sit between model-parallel layers, a strategy other than hybrid', async () => {
  const run = (layers: unknown[], devices: number) =>
    train(tinyConfig({ layers, train: { devices, strategy: 'hybrid' } }), {
      out: join(mkdtempSync(join(tmpdir(), 'paratrain-trick-err-')), 'run'),
    });
  await assert.rejects(
    run([...conv, { dense: { units: 3, activation: 'relu', parallel: 'model' } }, { dense: { units: 10 } }], 4),
    /model\.layers\[3\] dense: 'parallel: model' splits its 3 units over 4 devices, but every device needs at least one; use at most 3 devices or a layer with at least 4 units/,
  );
  await assert.rejects(
    run(
      [
        ...conv,
        { dense: { units: 8, parallel: 'model' } },
        { batchNorm: {} },
        { dense: { units: 10, parallel: 'model' } },
      ],
      2,
    ),
    /model\.layers\[4\] batchNorm: cannot lie between the model-parallel dense layers model\.layers\[3\] and model\.layers\[5\]; only activations, dropout and flatten can/,
  );
  await assert.rejects(
    run(
      [
        ...conv,
        { dense: { units: 8, parallel: 'model' } },
        { dense: { units: 8 } },
        { dense: { units: 10, parallel: 'model' } },
      ],
      2,
    ),
    /model\.layers\[4\] dense: lies between the model-parallel dense layers model\.layers\[3\] and model\.layers\[5\] but is not marked; add 'parallel: model' to it too/,
  );
  await assert.rejects(
    run([{ conv2d: { filters: 2, kernelSize: 3 } }, { dense: { units: 10, parallel: 'model' } }], 2),
    /model\.layers\[1\] dense: expects a flat input but receives shape \[26, 26, 2\]; add a flatten layer before it/,
  );
  assert.throws(
    () => tinyConfig({ layers: pair, train: { devices: 2, strategy: 'bsp' } }),
    (e: unknown) => {
      assert.ok(e instanceof ConfigError);
      assert.match(
        e.message,
        /train\.strategy: 'parallel: model' \(model\.layers\[3\]\) needs the synchronous hybrid strategy: .*got bsp — use strategy hybrid/,
      );
      return true;
    },
  );
  // one device: parallel: model is simply the unsplit layer, whatever the strategy
  const one = parseConfig(
    { model: { input: [4], layers: [{ dense: { units: 2, parallel: 'model' } }] }, train: { strategy: 'bsp' } },
    'c',
  );
  assert.deepStrictEqual(one.model.layers[0], {
    type: 'dense',
    units: 2,
    activation: 'linear',
    useBias: true,
    parallel: 'model',
  });
});
