/**
 * Training steps on the webgpu backend against the js backend, replica by replica: the same
 * initial weights, the same batches of the shipped Fashion-MNIST subset, the same optimizer (Adam,
 * on the host for both), for a dense network and mnist-small (convolutions, max pooling, dropout).
 * After the steps every weight agrees within 1e-4 + 1e-3·|w| (float32 sums in another order,
 * through several steps of Adam), and so do the losses.
 */
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { jsBackend } from '../../src/kernels/js/index.ts';
import { webgpuBackend } from '../../src/kernels/webgpu/index.ts';
import { loadConfig } from '../../src/config/index.ts';
import { loadFashionMnist } from '../../src/data/fashionMnist.ts';
import { Replica } from '../../src/runtime/device/replica.ts';
import type { RunConfig } from '../../src/config/runConfig.ts';
import { gpuOrSkip, releaseGpu } from './gpuTest.ts';

after(releaseGpu);

const SUBSET = new URL('../../data/fashion-mnist-subset/', import.meta.url).pathname;
const example = (name: string) => loadConfig(new URL(`../../examples/${name}.yaml`, import.meta.url).pathname);

async function compareSteps(t: import('node:test').TestContext, config: RunConfig, steps: number, batch: number) {
  const gpu = await gpuOrSkip(t);
  if (!gpu) return;
  const { train } = await loadFashionMnist({ dir: SUBSET, log: () => {} });
  const cpu = new Replica(jsBackend, config);
  const dev = new Replica(webgpuBackend(gpu), config);
  dev.model.params.set(cpu.model.params);
  const per = train.images.length / train.count;
  for (let s = 0; s < steps; s++) {
    const at = s * batch;
    const images = train.images.subarray(at * per, (at + batch) * per);
    const labels = train.labels.subarray(at, at + batch);
    const ctx = { training: true, seed: 7, step: s, sampleOffset: at };
    const results = [];
    for (const r of [cpu, dev]) {
      r.zeroGrads();
      results.push(await r.computeGradientsAsync(images, labels, ctx, 1 / batch));
      r.view().localStep(config.optimizer.lr);
    }
    const [a, b] = results;
    assert.ok(
      Math.abs(a!.lossSum - b!.lossSum) <= 1e-4 * Math.abs(a!.lossSum),
      `step ${s}: loss ${a!.lossSum} vs ${b!.lossSum}`,
    );
    assert.equal(a!.correct, b!.correct, `step ${s}: correct`);
  }
  const want = cpu.model.params,
    got = dev.model.params;
  let worst = 0;
  for (let i = 0; i < want.length; i++) {
    const err = Math.abs(got[i]! - want[i]!) / (1e-4 + 1e-3 * Math.abs(want[i]!));
    if (err > worst) worst = err;
    assert.ok(err <= 1, `weight ${i}: ${got[i]} vs ${want[i]}`);
  }
  t.diagnostic(`worst weight error ${worst.toFixed(3)} of the tolerance after ${steps} steps`);
}

test('webgpu trains the dense example as js does (5 steps of Adam)', async (t) => {
  await compareSteps(t, example('mlp'), 5, 32);
});

test('webgpu trains mnist-small (conv, max pool, dropout) as js does (2 steps of Adam)', async (t) => {
  await compareSteps(t, example('mnist-small'), 2, 8);
});
