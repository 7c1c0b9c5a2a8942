/**
 * train.syncBatchNorm on 2 webgpu devices (two backends on the test GPU, collectives in this thread)
 * against the same run on 2 js devices: conv2d → batchNorm → relu → max pool → dense, 3 steps of
 * SGD with momentum on 21 images of the shipped subset, batches of 4 per device (the last global
 * batch of 5 splits 3 + 2, so the devices' shares of the statistics differ), and rank 0's
 * checkpoint — weights, running statistics, momentum — compared tensor by tensor. The GPU sums in
 * float32 in another order than js, so every value agrees within 1e-5 + 1e-4·|value|. Per-device
 * statistics end elsewhere on js (checked), so a device that skipped the sums would fail.
 */
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { jsBackend } from '../../src/kernels/js/index.ts';
import { tinyConfig } from '../parallel/helpers.ts';
import { releaseGpu } from './gpuTest.ts';
import { assertSameTensors, trainOnDevices, twoWebgpuBackends } from './twoDeviceRun.ts';

after(releaseGpu);

const TOL = { rtol: 1e-4, atol: 1e-5 };

const config = (syncBatchNorm: boolean) =>
  tinyConfig({
    layers: [
      { conv2d: { filters: 4, kernelSize: 3, strides: 2 } },
      { batchNorm: { momentum: 0.8 } },
      { relu: {} },
      { maxPool2d: { poolSize: 2 } },
      { flatten: {} },
      { dense: { units: 10 } },
    ],
    data: { batchSize: 4, trainLimit: 21 },
    train: { devices: 2, strategy: 'hybrid', backend: 'js', syncBatchNorm },
  });

test('synchronised BatchNorm trains on 2 webgpu devices as on 2 js devices', async (t) => {
  const gpus = await twoWebgpuBackends(t);
  if (!gpus) return;
  const want = await trainOnDevices(config(true), [jsBackend, jsBackend]);
  const perDevice = await trainOnDevices(config(false), [jsBackend, jsBackend]);
  const running = ['layers.1.runningMean', 'layers.1.runningVar'];
  assert.ok(
    running.some((name) => want.get(name)!.some((v, i) => Math.abs(v - perDevice.get(name)![i]!) > 1e-3)),
    'synchronised and per-device statistics end alike: the comparison could not tell them apart',
  );
  const got = await trainOnDevices(config(true), gpus);
  assertSameTensors(got, want, TOL, 'webgpu vs js');
});
