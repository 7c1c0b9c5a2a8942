/**
 * Training steps on the webgpu backend against the js backend, replica by replica: the same
 * initial weights, the same batches of the shipped Fashion-MNIST subset, the same optimizer
 * (Adam), for a dense network and mnist-small (convolutions, max pooling, dropout). A device
 * among several (towers: the host keeps the weights and steps the optimizer) and the job's only
 * device (resident: the optimizer, clipping and the non-finite check on the GPU) each read once per
 * step. After the steps every weight agrees within 1e-4 + 1e-3·|w| (float32 sums in another
 * order, through several steps of Adam), and so do the losses.
 */
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { jsBackend } from '../../src/kernels/js/index.ts';
import { webgpuBackend } from '../../src/kernels/webgpu/index.ts';
import { loadConfig } from '../../src/config/index.ts';
import { loadFashionMnist } from '../../src/data/fashionMnist.ts';
import { Replica } from '../../src/runtime/device/replica.ts';
import type { RunConfig } from '../../src/config/runConfig.ts';
import type { StepResult } from '../../src/runtime/device/gradientSource.ts';
import { gpuOrSkip, releaseGpu } from './gpuTest.ts';

after(releaseGpu);

const SUBSET = new URL('../../data/fashion-mnist-subset/', import.meta.url).pathname;
const example = (name: string) => loadConfig(new URL(`../../examples/${name}.yaml`, import.meta.url).pathname);

interface Steps {
  steps: number;
  batch: number;
  /** the job's only device: everything stays on the GPU */
  alone: boolean;
  /** a step whose gradient gets an injected NaN: both replicas must skip it */
  poisoned?: number;
}

async function compareSteps(t: import('node:test').TestContext, config: RunConfig, o: Steps) {
  const gpu = await gpuOrSkip(t);
  if (!gpu) return;
  const { steps, batch } = o;
  const { train } = await loadFashionMnist({ dir: SUBSET, log: () => {} });
  const cpu = new Replica(jsBackend, config);
  const dev = new Replica(webgpuBackend(gpu), config, { alone: o.alone });
  dev.model.params.set(cpu.model.params);
  dev.weightsChanged();
  const per = train.images.length / train.count;
  for (let s = 0; s < steps; s++) {
    const at = s * batch;
    const images = train.images.subarray(at * per, (at + batch) * per);
    const labels = train.labels.subarray(at, at + batch);
    const ctx = { training: true, seed: 7, step: s, sampleOffset: at };
    const results: StepResult[] = [];
    const poison = s === o.poisoned ? (g: Float32Array) => void (g[0] = NaN) : undefined;
    for (const r of [cpu, dev]) {
      const reads: number = gpu.reads;
      r.zeroGrads(poison);
      results.push(await r.computeGradientsAsync(images, labels, ctx, 1 / batch, undefined, batch));
      if (r === dev) assert.equal(gpu.reads - reads, 1, `step ${s}: one read`);
      const view = r.view();
      const finite = view.gradientsFinite!();
      assert.equal(finite, s !== o.poisoned, `step ${s}: the gradient is ${finite ? '' : 'not '}finite`);
      if (!finite) continue;
      await view.clipGradients?.();
      view.localStep(config.optimizer.lr);
    }
    const [normA, normB] = [cpu.takeGradNorm(), dev.takeGradNorm()];
    assert.equal(normB === undefined, normA === undefined, `step ${s}: both clip or neither`);
    if (normA !== undefined)
      assert.ok(Math.abs(normA - normB!) <= 1e-4 * normA, `step ${s}: gradient norm ${normB} vs ${normA}`);
    const [a, b] = results;
    assert.ok(
      Math.abs(a!.lossSum - b!.lossSum) <= 1e-4 * Math.abs(a!.lossSum),
      `step ${s}: loss ${a!.lossSum} vs ${b!.lossSum}`,
    );
    assert.equal(a!.correct, b!.correct, `step ${s}: correct`);
  }
  await dev.hostCopies();
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

test('webgpu trains the dense example as js does (3 steps of Adam), among devices and alone', async (t) => {
  await compareSteps(t, example('mlp'), { steps: 3, batch: 32, alone: false });
  await compareSteps(t, example('mlp'), { steps: 3, batch: 32, alone: true });
});

test('alone on a GPU: clipping by global norm and a skipped non-finite step as on js', async (t) => {
  const config = example('mlp');
  config.train.clipGradNorm = 0.5;
  config.optimizer = { type: 'sgd', lr: 0.05, momentum: 0.9, nesterov: true, weightDecay: 1e-4 };
  // a good step (momentum set), the skipped one, a good step that uses the momentum
  await compareSteps(t, config, { steps: 3, batch: 32, alone: true, poisoned: 1 });
});

test('webgpu trains mnist-small (conv, max pool, dropout) as js does (2 steps of Adam), alone', async (t) => {
  await compareSteps(t, example('mnist-small'), { steps: 2, batch: 8, alone: true });
});
