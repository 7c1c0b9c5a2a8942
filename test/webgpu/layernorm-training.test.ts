/**
 * Training steps of a model with a layerNorm on the webgpu backend against the js backend: the same
 * initial weights, the same batches of random data, the same optimizer (plain SGD with a large rate,
 * on the host for both, so that a gradient error shows in the weights; Adam's first steps would
 * hide it behind the gradients' signs). Each step's gradients agree within 1e-6 + 1e-3·|g| and its
 * loss within 1e-4 relative; after two steps every weight agrees within 1e-4 + 1e-3·|w| (float32
 * sums in another order).
 */
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { jsBackend } from '../../src/kernels/js/index.ts';
import { webgpuBackend } from '../../src/kernels/webgpu/index.ts';
import { resolveConfig } from '../../src/config/index.ts';
import { Replica } from '../../src/runtime/device/replica.ts';
import { random } from './compareArrays.ts';
import { gpuOrSkip, releaseGpu } from './gpuTest.ts';

after(releaseGpu);

const INPUT = [4, 4, 3];
const BATCH = 24;
const STEPS = 2;

test('webgpu trains flatten → dense → layerNorm → relu → dense as js does (2 steps of SGD)', async (t) => {
  const gpu = await gpuOrSkip(t);
  if (!gpu) return;
  const config = resolveConfig({
    model: {
      input: INPUT,
      layers: ['flatten', { dense: { units: 32 } }, { layerNorm: {} }, 'relu', { dense: { units: 10 } }],
    },
    optimizer: { sgd: { lr: 0.5 } },
  });
  const cpu = new Replica(jsBackend, config);
  const dev = new Replica(webgpuBackend(gpu), config);
  dev.model.params.set(cpu.model.params);
  const per = INPUT.reduce((a, b) => a * b, 1);
  for (let s = 0; s < STEPS; s++) {
    // a mean away from 0 in every sample, so the layer's centring matters
    const images = random(BATCH * per, 100 + s, 0, 3);
    const labels = Int32Array.from({ length: BATCH }, (_, i) => (i * 7 + s * 3) % 10);
    const ctx = { training: true, seed: 7, step: s, sampleOffset: s * BATCH };
    const results = [];
    for (const r of [cpu, dev]) {
      r.zeroGrads();
      results.push(await r.computeGradientsAsync(images, labels, ctx, 1 / BATCH));
      r.view().localStep(config.optimizer.lr);
    }
    const [a, b] = results;
    const wantGrads = cpu.model.grads,
      gotGrads = dev.model.grads;
    for (let i = 0; i < wantGrads.length; i++)
      assert.ok(
        Math.abs(gotGrads[i]! - wantGrads[i]!) <= 1e-6 + 1e-3 * Math.abs(wantGrads[i]!),
        `step ${s}: gradient ${i}: ${gotGrads[i]} vs ${wantGrads[i]}`,
      );
    assert.ok(
      Math.abs(a!.lossSum - b!.lossSum) <= 1e-4 * Math.abs(a!.lossSum),
      `step ${s}: loss ${a!.lossSum} vs ${b!.lossSum}`,
    );
    assert.equal(a!.correct, b!.correct, `step ${s}: correct`);
  }
  const want = cpu.model.params,
    got = dev.model.params;
  let worst = 0,
    moved = 0;
  for (let i = 0; i < want.length; i++) {
    const err = Math.abs(got[i]! - want[i]!) / (1e-4 + 1e-3 * Math.abs(want[i]!));
    if (err > worst) worst = err;
    assert.ok(err <= 1, `weight ${i}: ${got[i]} vs ${want[i]}`);
  }
  // the steps changed the layer norm's γ and β (initialised to ones and zeros), so they were trained
  const gammaBeta = cpu.model.params.subarray(per * 32 + 32, per * 32 + 32 + 64);
  for (let j = 0; j < 32; j++) if (gammaBeta[j] !== 1 || gammaBeta[32 + j] !== 0) moved++;
  assert.ok(moved > 16, `only ${moved} of γ, β's 32 features changed`);
  t.diagnostic(`worst weight error ${worst.toFixed(3)} of the tolerance after ${STEPS} steps`);
});
