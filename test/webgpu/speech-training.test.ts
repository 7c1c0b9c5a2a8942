/**
 * Training steps of DeepSpeech-shaped models (conv1d, a bidirectional lstm or gru, dense logits,
 * the CTC loss; and examples/deepspeech-small.yaml's own layers, per-sample dropout included) on the
 * webgpu backend against the js backend: the same initial weights, the
 * same padded batches of random sequences of different lengths (every sample padded, so the
 * layers' padding rules are exercised), plain SGD on the host for both. Each step's gradients agree
 * within 1e-5 + 1e-3·|g| and its loss within 1e-4 relative; after two steps every weight agrees
 * within 1e-4 + 1e-3·|w| (float32 sums in another order on the GPU).
 */
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { jsBackend } from '../../src/kernels/js/index.ts';
import { webgpuBackend } from '../../src/kernels/webgpu/index.ts';
import { speechBatch } from '../../src/data/batches.ts';
import { Replica } from '../../src/runtime/device/replica.ts';
import { speechConfig, syntheticSpeech } from '../speech/trainHelpers.ts';
import { gpuOrSkip, releaseGpu } from './gpuTest.ts';

after(releaseGpu);

const STEPS = 2;
const WIDTH = 9;

const MODELS: { name: string; layers: unknown[] }[] = [
  {
    // the first layer's input gradient is never needed: conv1d's is, behind a dense layer
    name: 'dense → conv1d (same, stride 2) → gru (sum) → dense',
    layers: [
      { dense: { units: 8, activation: 'clippedRelu' } },
      { conv1d: { filters: 8, kernelSize: 5, strides: 2, padding: 'same', activation: 'relu' } },
      { gru: { units: 16, bidirectional: 'sum' } },
      { dense: { units: 29 } },
    ],
  },
  {
    // examples/deepspeech-small.yaml's stack, widths included: per-sample dropout on padded sequences
    name: "deepspeech-small's layers (dense, dropout, dense, dropout, lstm (concat), dropout, dense)",
    layers: [
      { dense: { units: 96, activation: 'clippedRelu' } },
      { dropout: { rate: 0.3, masks: 'per-sample' } },
      { dense: { units: 96, activation: 'clippedRelu' } },
      { dropout: { rate: 0.3, masks: 'per-sample' } },
      { lstm: { units: 96, bidirectional: 'concat' } },
      { dropout: { rate: 0.3, masks: 'per-sample' } },
      { dense: { units: 29 } },
    ],
  },
  {
    name: 'conv1d (valid) → lstm (concat) → dense',
    layers: [
      { conv1d: { filters: 8, kernelSize: 3, activation: 'relu' } },
      { lstm: { units: 16, bidirectional: 'concat' } },
      { dense: { units: 29 } },
    ],
  },
];

for (const { name, layers } of MODELS) {
  test(`webgpu trains ${name} with CTC as js does (${STEPS} steps of SGD)`, async (t) => {
    const gpu = await gpuOrSkip(t);
    if (!gpu) return;
    const ds = syntheticSpeech(12, { featureSize: 3, context: 1 }).speech!;
    const config = speechConfig({ width: WIDTH, layers, optimizer: { sgd: { lr: 0.5 } } });
    const cpu = new Replica(jsBackend, config);
    const dev = new Replica(webgpuBackend(gpu), config);
    dev.model.params.set(cpu.model.params);
    for (let s = 0; s < STEPS; s++) {
      // transcripts of 1 or 2 symbols (sample i has 1 + i % 4), so stride 2 leaves CTC enough frames;
      // the second batch is smaller, so the layers' buffers hold the first step's values
      const indices = s === 0 ? [9, 4, 0, 8, 1, 5] : [0, 1, 4, 5, 8];
      const first = speechBatch(ds, indices);
      // three frames past the longest: every sample has padding
      const batch = speechBatch(ds, indices, first.sequence!.frames + 3);
      const sequence = batch.sequence!;
      assert.ok(new Set(sequence.lengths).size > 2, 'different lengths');
      const ctx = { training: true, seed: 7, step: s, sampleOffset: 0, lengths: sequence.lengths };
      const results = [];
      for (const r of [cpu, dev]) {
        r.zeroGrads();
        const n = indices.length;
        results.push(
          await r.computeGradientsAsync(batch.images, batch.labels, ctx, 1 / n, undefined, n, undefined, sequence),
        );
        r.view().localStep(config.optimizer.lr);
      }
      const [a, b] = results;
      assert.ok(Number.isFinite(a!.lossSum) && a!.lossSum > 0, `step ${s}: loss ${a!.lossSum}`);
      assert.ok(
        Math.abs(a!.lossSum - b!.lossSum) <= 1e-4 * Math.abs(a!.lossSum),
        `step ${s}: loss ${a!.lossSum} vs ${b!.lossSum}`,
      );
      const want = cpu.model.grads,
        got = dev.model.grads;
      let nonZero = 0;
      for (let i = 0; i < want.length; i++) {
        if (want[i] !== 0) nonZero++;
        assert.ok(
          Math.abs(got[i]! - want[i]!) <= 1e-5 + 1e-3 * Math.abs(want[i]!),
          `step ${s}: gradient ${i}: ${got[i]} vs ${want[i]}`,
        );
      }
      assert.ok(nonZero > want.length / 2, `step ${s}: only ${nonZero} of ${want.length} gradients are not 0`);
    }
    const want = cpu.model.params,
      got = dev.model.params;
    let worst = 0;
    for (let i = 0; i < want.length; i++) {
      const err = Math.abs(got[i]! - want[i]!) / (1e-4 + 1e-3 * Math.abs(want[i]!));
      if (err > worst) worst = err;
      assert.ok(err <= 1, `weight ${i}: ${got[i]} vs ${want[i]}`);
    }
    t.diagnostic(`worst weight error ${worst.toFixed(3)} of the tolerance after ${STEPS} steps`);
  });
}
