/**
 * BatchNorm trained on the webgpu backend against the js backend: conv2d (4 filters) → batchNorm →
 * relu → flatten → dense 10 on random 8×8×1 images, the same initial weights, two steps of SGD
 * with momentum (on the host for both), then an evaluation-mode forward through the running
 * statistics. The GPU sums in float32 where js sums in float64, so after the steps every weight
 * and running statistic agrees within 1e-4 + 1e-3·|value|, the logits within 1e-4 + 1e-3·|logit|.
 */
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { jsBackend } from '../../src/kernels/js/index.ts';
import { webgpuBackend } from '../../src/kernels/webgpu/index.ts';
import { parseConfig, parseYaml } from '../../src/config/index.ts';
import { Replica } from '../../src/runtime/device/replica.ts';
import { randomArray } from '../util/close.ts';
import { gpuOrSkip, releaseGpu } from './gpuTest.ts';

after(releaseGpu);

const CONFIG = `
model:
  input: [8, 8, 1]
  layers:
    - conv2d: { filters: 4, kernelSize: 3 }
    - batchNorm: { momentum: 0.8 }
    - relu: {}
    - flatten: {}
    - dense: { units: 10 }
loss: softmaxCrossEntropy
optimizer: { sgd: { lr: 0.1, momentum: 0.9 } }
data: { dataset: fashion-mnist, batchSize: 12 }
`;

function assertClose(got: Float32Array, want: Float32Array, what: string): void {
  assert.equal(got.length, want.length, `${what}: length`);
  for (let i = 0; i < want.length; i++) {
    const allowed = 1e-4 + 1e-3 * Math.abs(want[i]!);
    assert.ok(Math.abs(got[i]! - want[i]!) <= allowed, `${what}[${i}]: webgpu ${got[i]}, js ${want[i]}`);
  }
}

test('webgpu trains conv → batchNorm → relu → dense as js does, and evaluates through the running statistics', async (t) => {
  const gpu = await gpuOrSkip(t);
  if (!gpu) return;
  const config = parseConfig(parseYaml(CONFIG, 'batchnorm-training'), 'batchnorm-training');
  const batch = 12,
    per = 8 * 8;
  const cpu = new Replica(jsBackend, config);
  const dev = new Replica(webgpuBackend(gpu), config);
  dev.model.params.set(cpu.model.params);
  dev.model.state.set(cpu.model.state);
  const initialState = cpu.model.state.slice();
  for (let s = 0; s < 2; s++) {
    const images = randomArray(batch * per, 100 + s).map((v) => 0.5 + v);
    const labels = Int32Array.from({ length: batch }, (_, i) => (i * 7 + s) % 10);
    const ctx = { training: true, seed: 7, step: s, sampleOffset: s * batch };
    for (const r of [cpu, dev]) {
      r.zeroGrads();
      await r.computeGradientsAsync(images, labels, ctx, 1 / batch);
      r.view().localStep(config.optimizer.lr);
    }
  }
  // the running statistics moved (the test would pass vacuously on untouched state)
  assert.ok(
    cpu.model.state.some((v, i) => Math.abs(v - initialState[i]!) > 1e-3),
    'running statistics unchanged by training',
  );
  assertClose(dev.model.params, cpu.model.params, 'weights');
  assertClose(dev.model.state, cpu.model.state, 'running statistics');

  const images = randomArray(batch * per, 300).map((v) => 0.5 + v);
  const logits = [];
  for (const r of [cpu, dev]) {
    r.weightsToDevice();
    const y = r.model.forward(r.batchTensor(images, batch), { training: false, seed: 7, step: 2, sampleOffset: 0 });
    await r.model.device?.toHost([y.data]);
    logits.push(y.data.slice());
  }
  assertClose(logits[1]!, logits[0]!, 'evaluation logits');
});
