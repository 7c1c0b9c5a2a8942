/**
 * Whole runs with `backend: webgpu` (device threads each opening their own GPUDevice; on
 * SwiftShader two share one adapter): hybrid on 2 webgpu devices (16 KB buckets, each read and
 * reduced as backward produces it) ends with the weights a js run ends with, its checkpoint resumes
 * on js and a js one on one webgpu device, each ending where the uninterrupted js run ends, and
 * bmuf (weights averaged on the host) on 2 webgpu devices ends where it does on js. The dense example
 * on 128 images of the shipped subset, batches of 32 (4 steps an epoch), SGD with momentum.
 * Tolerance for the final weights: 2e-4 + 2e-3·|w| (float32 sums in another order).
 */
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { train, readCheckpoint, loadConfig } from '../../src/index.ts';
import { gpuOrSkip, releaseGpu } from './gpuTest.ts';

after(releaseGpu);

const MLP = new URL('../../examples/mlp.yaml', import.meta.url).pathname;
const SUBSET = new URL('../../data/fashion-mnist-subset/', import.meta.url).pathname;
const dir = mkdtempSync(join(tmpdir(), 'paratrain-webgpu-runs-'));
after(() => rmSync(dir, { recursive: true, force: true }));

async function run(
  name: string,
  backend: 'js' | 'webgpu',
  devices: number,
  epochs: number,
  resume?: string,
  strategy: 'hybrid' | 'bmuf' = 'hybrid',
): Promise<Float32Array[]> {
  const config = loadConfig(MLP);
  config.data.trainLimit = 128;
  config.data.testLimit = 64;
  // without dropout, so that what is compared is the kernels and the reduction alone
  config.model.layers = config.model.layers.filter((l) => l.type !== 'dropout');
  // SGD with momentum: Adam's normalised step turns a rounding difference in a near-zero gradient into a step of lr
  config.optimizer = { type: 'sgd', lr: 0.05, momentum: 0.9, nesterov: false, weightDecay: 0 };
  // hybrid's buckets small enough that several are read and reduced while backward goes on
  if (strategy === 'hybrid') config.train.strategy = { type: 'hybrid', bucketBytes: 16 * 1024 };
  const out = resume ?? join(dir, name);
  await train(config, {
    ...(resume ? { resume } : { out }),
    backend,
    devices,
    strategy,
    epochs,
    batchSize: 32 / devices,
    dataDir: SUBSET,
    seed: 3,
    log: () => {},
  });
  const ckpt = readCheckpoint(join(out, 'model.safetensors'));
  return [...ckpt.tensors.values()].map((t) => t.data);
}

function assertSameWeights(got: Float32Array[], want: Float32Array[], what: string): void {
  assert.equal(got.length, want.length);
  for (let k = 0; k < want.length; k++)
    for (let i = 0; i < want[k]!.length; i++) {
      const g = got[k]![i]!,
        w = want[k]![i]!;
      assert.ok(Math.abs(g - w) <= 2e-4 + 2e-3 * Math.abs(w), `${what}: tensor ${k} [${i}] ${g} vs ${w}`);
    }
}

test('hybrid on 2 webgpu devices ends where a js run ends; each checkpoint resumes on the other backend', async (t) => {
  if (!(await gpuOrSkip(t))) return;
  const js = await run('js', 'js', 1, 1);
  const two = await run('webgpu-2', 'webgpu', 2, 1);
  assertSameWeights(two, js, '2 webgpu devices vs js');
  // the one-epoch runs go on for a second epoch on the other backend, ending where 2 js epochs end
  const js2 = await run('js-2', 'js', 1, 2);
  const resumedOnJs = await run('', 'js', 2, 2, join(dir, 'webgpu-2'));
  assertSameWeights(resumedOnJs, js2, 'webgpu epoch, then js');
  // one webgpu device (the job's only one) trains the second epoch as js does
  const resumedOnGpu = await run('', 'webgpu', 1, 2, join(dir, 'js'));
  assertSameWeights(resumedOnGpu, js2, 'js epoch, then webgpu');
});

test('bmuf on 2 webgpu devices ends where it does on js', async (t) => {
  if (!(await gpuOrSkip(t))) return;
  const js = await run('bmuf-js', 'js', 2, 1, undefined, 'bmuf');
  const gpu = await run('bmuf-gpu', 'webgpu', 2, 1, undefined, 'bmuf');
  assertSameWeights(gpu, js, 'bmuf, webgpu vs js');
});
