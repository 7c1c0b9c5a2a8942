/**
 * A tiny GPT trained on the webgpu backend against the js backend: token embedding (vocab 11, 16
 * wide), learned positions, one pre-norm transformer block (2 heads, causal), a final layerNorm, the
 * output projection tied to the embedding, loss tokenCrossEntropy — every layer on the GPU, as the
 * job's only device (weights and Adam's state stay there) and, with dropout 0.1 in the block (the
 * attention weights' too), as a device among several. The same initial weights and the same synthetic
 * token ids for 3 steps; after them every weight agrees within 1e-4 + 1e-3·|w| (float32 sums in
 * another order through 3 steps of Adam), and each step's loss within 1e-4 of it. Adam's eps is
 * 1e-4: in_proj_bias's key third has no gradient in exact arithmetic (softmax ignores a constant
 * added to a query's scores), and a tiny eps would turn each backend's rounding there into a full
 * step of lr (test/nn/transformerTorchRun.ts says more).
 */
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { jsBackend } from '../../src/kernels/js/index.ts';
import { webgpuBackend } from '../../src/kernels/webgpu/index.ts';
import { resolveConfig } from '../../src/config/index.ts';
import { Replica } from '../../src/runtime/device/replica.ts';
import type { StepResult } from '../../src/runtime/device/gradientSource.ts';
import { gpuOrSkip, releaseGpu } from './gpuTest.ts';

after(releaseGpu);

const VOCAB = 11,
  FRAMES = 12,
  BATCH = 3,
  STEPS = 3;

const tinyGpt = (dropout: number) =>
  resolveConfig({
    model: {
      input: [FRAMES],
      layers: [
        { embedding: { vocab: VOCAB, dim: 16 } },
        { positionEncoding: { encoding: 'learned' } },
        { transformerBlock: { heads: 2, dropout } },
        { layerNorm: {} },
        { tiedEmbedding: {} },
      ],
    },
    loss: 'tokenCrossEntropy',
    optimizer: { adam: { lr: 0.01, eps: 1e-4 } },
    train: { seed: 5 },
  });

/** Step s's windows: pseudo-random ids, each position's label the next id of its window. */
function batch(s: number): { ids: Float32Array; labels: Int32Array } {
  const ids = new Float32Array(BATCH * FRAMES),
    labels = new Int32Array(BATCH * FRAMES);
  let x = 977 * (s + 1);
  const next = () => (x = (x * 1103515245 + 12345) % 2 ** 31) % VOCAB;
  for (let n = 0; n < BATCH; n++) {
    let id = next();
    for (let t = 0; t < FRAMES; t++) {
      ids[n * FRAMES + t] = id;
      id = next();
      labels[n * FRAMES + t] = id;
    }
  }
  return { ids, labels };
}

async function compareSteps(t: import('node:test').TestContext, dropout: number, alone: boolean) {
  const gpu = await gpuOrSkip(t);
  if (!gpu) return;
  const config = tinyGpt(dropout);
  const cpu = new Replica(jsBackend, config);
  const dev = new Replica(webgpuBackend(gpu), config, { alone });
  dev.model.params.set(cpu.model.params);
  dev.weightsChanged();
  const start = cpu.model.params.slice();
  for (let s = 0; s < STEPS; s++) {
    const { ids, labels } = batch(s);
    const ctx = { training: true, seed: 7, step: s, sampleOffset: s * BATCH };
    const results: StepResult[] = [];
    for (const r of [cpu, dev]) {
      r.zeroGrads();
      results.push(await r.computeGradientsAsync(ids, labels, ctx, 1 / BATCH, undefined, BATCH));
      const view = r.view();
      assert.ok(view.gradientsFinite!(), `step ${s}: the gradient is finite`);
      view.localStep(config.optimizer.lr);
    }
    const [a, b] = results;
    assert.ok(
      Math.abs(a!.lossSum - b!.lossSum) <= 1e-4 * Math.abs(a!.lossSum),
      `step ${s}: loss ${b!.lossSum} vs ${a!.lossSum}`,
    );
  }
  await dev.hostCopies();
  const want = cpu.model.params,
    got = dev.model.params;
  let worst = 0,
    moved = 0;
  for (let i = 0; i < want.length; i++) {
    const err = Math.abs(got[i]! - want[i]!) / (1e-4 + 1e-3 * Math.abs(want[i]!));
    worst = Math.max(worst, err);
    moved = Math.max(moved, Math.abs(want[i]! - start[i]!));
    assert.ok(err <= 1, `weight ${i}: ${got[i]} vs ${want[i]}`);
  }
  // the steps move weights far past the tolerance, so agreeing says something
  assert.ok(moved > 0.01, `the weights moved ${moved}`);
  t.diagnostic(`worst weight error ${worst.toFixed(3)} of the tolerance after ${STEPS} steps`);
}

test('webgpu trains a tiny transformer (embedding, positions, block, tied output) as js does, alone', async (t) => {
  await compareSteps(t, 0, true);
});

test('webgpu trains it with dropout in the block as js does, among devices', async (t) => {
  await compareSteps(t, 0.1, false);
});
