/**
 * Fine-tuning (`initFrom`): a new run starts from a checkpoint's weights and state with a fresh
 * optimizer at step 0. With plain SGD, a fixed data order and no dropout, one epoch from the
 * weights of a one-epoch run equals the second epoch of a two-epoch run, bit for bit; a
 * checkpoint of another architecture is refused naming the first tensor that differs.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { tinyConfig } from '../parallel/helpers.ts';
import { train } from '../../src/runtime/run/train.ts';
import { assertSameTensors, freshDir, tensorsOf } from './resumeHelpers.ts';

const layers = (parallel: boolean) => [
  { conv2d: { filters: 4, kernelSize: 3, strides: 2, activation: 'relu' } },
  { flatten: {} },
  { dense: { units: 16, activation: 'relu', ...(parallel ? { parallel: 'model' } : {}) } },
  { dense: { units: 10, ...(parallel ? { parallel: 'model' } : {}) } },
];
const configOf = (epochs: number, devices: number, parallel = false) =>
  tinyConfig({
    optimizer: { sgd: { lr: 0.05 } },
    data: { shuffle: false },
    layers: layers(parallel),
    train: { epochs, devices, strategy: 'hybrid', checkpointEvery: 0 },
  });
const weights = (name: string) => name.startsWith('layers.');

for (const [what, devices, parallel] of [
  ['one device', 1, false],
  ['model-parallel dense layers on 2 devices', 2, true],
] as const) {
  test(`${what}: one epoch from a one-epoch run's weights equals the second epoch of a two-epoch run`, async () => {
    const first = await train(configOf(1, devices, parallel), { out: freshDir() });
    const both = await train(configOf(2, devices, parallel), { out: freshDir() });
    const tuned = await train(configOf(1, devices, parallel), { out: freshDir(), initFrom: first.checkpoint });
    assertSameTensors(tensorsOf(both.checkpoint), tensorsOf(tuned.checkpoint), 0, weights);
  });
}

test('initFrom a checkpoint of another architecture: refused before the run directory is made, naming the tensor and both shapes', async () => {
  const first = await train(configOf(1, 1), { out: freshDir() });
  const wider = tinyConfig({
    layers: [layers(false)[0], { flatten: {} }, { dense: { units: 32, activation: 'relu' } }, { dense: { units: 10 } }],
  });
  const out = freshDir();
  await assert.rejects(
    train(wider, { out, initFrom: first.checkpoint }),
    /checkpoint .*model\.safetensors: 'layers\.2\.kernel' has shape \[676, 16\], the model needs \[676, 32\]; it was written for a different model/,
  );
  assert.ok(!existsSync(out), 'no run directory is left behind');
  await assert.rejects(
    train(configOf(1, 1), { out: freshDir(), initFrom: first.checkpoint, resume: '/nowhere' }),
    /--resume and --init-from: give one/,
  );
});
