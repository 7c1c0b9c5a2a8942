/**
 * Training steps of examples/resnet-small.yaml (a stem, three residual blocks, one with a projected
 * shortcut, global pooling) on the webgpu backend against the js backend: the same initial weights,
 * the same batches of the shipped Fashion-MNIST subset, plain SGD with momentum on the host for
 * both (Adam's first steps would hide a gradient error behind the gradients' signs). Each step's
 * gradients agree within 1e-5 + 1e-3·|g| and its loss within 1e-4 relative; after the steps every
 * weight agrees within 1e-4 + 1e-3·|w| (float32 sums in another order).
 */
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { jsBackend } from '../../src/kernels/js/index.ts';
import { webgpuBackend } from '../../src/kernels/webgpu/index.ts';
import { loadConfig } from '../../src/config/index.ts';
import { loadFashionMnist } from '../../src/data/fashionMnist.ts';
import { Replica } from '../../src/runtime/device/replica.ts';
import { gpuOrSkip, releaseGpu } from './gpuTest.ts';

after(releaseGpu);

const SUBSET = new URL('../../data/fashion-mnist-subset/', import.meta.url).pathname;
const BATCH = 4;
const STEPS = 2;

/** The worst |got − want| / (abs + rel·|want|) over the arrays; over 1 fails, naming the index. */
function assertClose(got: Float32Array, want: Float32Array, abs: number, rel: number, what: string): number {
  assert.equal(got.length, want.length, `${what}: lengths`);
  let worst = 0;
  for (let i = 0; i < want.length; i++) {
    const err = Math.abs(got[i]! - want[i]!) / (abs + rel * Math.abs(want[i]!));
    if (!(err <= 1)) assert.fail(`${what} ${i}: ${got[i]} vs ${want[i]}`);
    worst = Math.max(worst, err);
  }
  return worst;
}

test('webgpu trains resnet-small (residual blocks, batchNorm) as js does (2 steps of SGD)', async (t) => {
  const gpu = await gpuOrSkip(t);
  if (!gpu) return;
  const config = loadConfig(new URL('../../examples/resnet-small.yaml', import.meta.url).pathname);
  config.optimizer = { type: 'sgd', lr: 0.05, momentum: 0.9, nesterov: false, weightDecay: 0 };
  const { train } = await loadFashionMnist({ dir: SUBSET, log: () => {} });
  const cpu = new Replica(jsBackend, config);
  const dev = new Replica(webgpuBackend(gpu), config);
  dev.model.params.set(cpu.model.params);
  const per = train.images.length / train.count;
  let worstGrad = 0;
  for (let s = 0; s < STEPS; s++) {
    const at = s * BATCH;
    const images = train.images.subarray(at * per, (at + BATCH) * per);
    const labels = train.labels.subarray(at, at + BATCH);
    const ctx = { training: true, seed: 7, step: s, sampleOffset: at };
    const results = [];
    for (const r of [cpu, dev]) {
      r.zeroGrads();
      results.push(await r.computeGradientsAsync(images, labels, ctx, 1 / BATCH));
    }
    worstGrad = Math.max(worstGrad, assertClose(dev.model.grads, cpu.model.grads, 1e-5, 1e-3, `step ${s}: gradient`));
    assert.ok(
      cpu.model.grads.some((g) => g !== 0),
      `step ${s}: the gradients are all zero`,
    );
    const [a, b] = results;
    assert.ok(
      Math.abs(a!.lossSum - b!.lossSum) <= 1e-4 * Math.abs(a!.lossSum),
      `step ${s}: loss ${a!.lossSum} vs ${b!.lossSum}`,
    );
    assert.equal(a!.correct, b!.correct, `step ${s}: correct`);
    for (const r of [cpu, dev]) r.view().localStep(config.optimizer.lr);
  }
  const worst = assertClose(dev.model.params, cpu.model.params, 1e-4, 1e-3, 'weight');
  t.diagnostic(
    `worst error, of the tolerance: gradients ${worstGrad.toFixed(3)}, weights ${worst.toPrecision(2)} after ${STEPS} steps`,
  );
});
