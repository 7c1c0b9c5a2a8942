/**
 * "One weird trick" on 2 webgpu devices (two backends on the test GPU, collectives in this thread)
 * against the same run on 2 js devices, and rank 0's checkpoint — the unsplit model gathered from
 * both devices' shards, with the optimizer's momentum — compared tensor by tensor. Three sections
 * cover every exchange: a channel-split conv (its input's rows gathered, its input gradient summed
 * over devices) feeding a column → row dense pair that ends on each device's rows; a column → row →
 * column dense stack whose last layer gathers its units and hands each device its rows back (both
 * 3 steps of SGD with momentum on 21 images of the shipped subset, batches of 4 per device: the last
 * global batch of 5 splits 3 + 2, so the exchanges pad); and a per-frame dense pair over the frames
 * of 18 synthetic utterances of 6 … 21 frames (CTC, 3 steps). The GPU sums in float32 in another
 * order than js, so every value agrees within 1e-5 + 1e-4·|value|; a value an exchange missed (a
 * device's stale copy) is off by far more.
 */
import { after, test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { jsBackend } from '../../src/kernels/js/index.ts';
import { tinyConfig } from '../parallel/helpers.ts';
import { speechConfig, syntheticSpeech } from '../speech/trainHelpers.ts';
import { releaseGpu } from './gpuTest.ts';
import { assertSameTensors, trainOnDevices, twoWebgpuBackends } from './twoDeviceRun.ts';

after(releaseGpu);

const TOL = { rtol: 1e-4, atol: 1e-5 };

const config = (layers: unknown[]) =>
  tinyConfig({
    layers,
    data: { batchSize: 4, trainLimit: 21 },
    train: { devices: 2, strategy: 'hybrid', backend: 'js' },
  });

async function compare(t: TestContext, layers: unknown[]): Promise<void> {
  const gpus = await twoWebgpuBackends(t);
  if (!gpus) return;
  const want = await trainOnDevices(config(layers), [jsBackend, jsBackend]);
  const got = await trainOnDevices(config(layers), gpus);
  // the run trained (the momentum moved): the comparison is not of untouched weights
  assert.ok(
    want.get('optimizer.velocity')!.some((v) => Math.abs(v) > 1e-3),
    'the momentum is zero: nothing trained',
  );
  assertSameTensors(got, want, TOL, 'webgpu vs js');
}

test('a channel-split conv and a column → row dense pair train on 2 webgpu devices as on 2 js devices', async (t) => {
  await compare(t, [
    { conv2d: { filters: 2, kernelSize: 3, strides: 2, activation: 'relu' } },
    { conv2d: { filters: 4, kernelSize: 3, strides: 2, activation: 'relu', parallel: 'model' } },
    { maxPool2d: { poolSize: 2 } },
    { flatten: {} },
    { dense: { units: 12, activation: 'relu', parallel: 'model' } },
    { dense: { units: 10, parallel: 'model' } },
  ]);
});

test('a column → row → column dense stack (units gathered, rows handed back) trains on 2 webgpu devices as on 2 js devices', async (t) => {
  await compare(t, [
    { maxPool2d: { poolSize: 4 } },
    { flatten: {} },
    { dense: { units: 12, activation: 'relu', parallel: 'model' } },
    { dense: { units: 8, activation: 'tanh', parallel: 'model' } },
    { dense: { units: 6, parallel: 'model' } },
    { relu: {} },
    { dense: { units: 10 } },
  ]);
});

test('a per-frame dense pair split over the frames of variable-length utterances trains on 2 webgpu devices as on 2 js devices', async (t) => {
  const gpus = await twoWebgpuBackends(t);
  if (!gpus) return;
  // 18 utterances of 6 … 21 frames, global batches of 6: each device's frames padded to the batch's longest
  const data = syntheticSpeech(18);
  const config = speechConfig({
    layers: [
      { dense: { units: 9, activation: 'clippedRelu', parallel: 'model' } },
      { dense: { units: 7, activation: 'relu', parallel: 'model' } },
      { dense: { units: 29 } },
    ],
    optimizer: { sgd: { lr: 0.05, momentum: 0.9 } },
    data: { batchSize: 6 },
    train: { devices: 2, strategy: 'hybrid' },
  });
  const want = await trainOnDevices(config, [jsBackend, jsBackend], data);
  const got = await trainOnDevices(config, gpus, data);
  assertSameTensors(got, want, TOL, 'webgpu vs js');
});
