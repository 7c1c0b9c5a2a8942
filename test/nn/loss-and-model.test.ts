import { test } from 'node:test';
import assert from 'node:assert/strict';
import { jsBackend } from '../../src/kernels/js/index.ts';
import { Tensor } from '../../src/tensor/tensor.ts';
import { SoftmaxCrossEntropy } from '../../src/nn/softmaxCrossEntropy.ts';
import { buildModel } from '../../src/nn/model.ts';
import type { ModelSpec } from '../../src/nn/spec.ts';
import { randomArray } from '../util/close.ts';
import { TRAIN_CTX } from './gradcheck.ts';

const B = jsBackend;

test('softmax cross-entropy: loss against float64, gradient against finite differences', () => {
  const n = 4,
    c = 5;
  const logits = new Tensor(
    [n, c],
    randomArray(n * c, 3).map((v) => 3 * v),
  );
  const labels = Int32Array.from([0, 4, 2, 2]);
  const loss = new SoftmaxCrossEntropy(B);
  const r = loss.compute(logits, labels, 1 / n);
  let expected = 0;
  for (let i = 0; i < n; i++) {
    const row = [...logits.data.subarray(i * c, i * c + c)];
    const max = Math.max(...row);
    const lse = max + Math.log(row.reduce((s, v) => s + Math.exp(v - max), 0));
    expected += lse - row[labels[i]!]!;
  }
  assert.ok(Math.abs(r.lossSum - expected) < 1e-4, `loss ${r.lossSum} vs ${expected}`);
  const grad = r.dlogits.data.slice();
  const eps = 1e-2;
  for (let i = 0; i < n * c; i++) {
    const saved = logits.data[i]!;
    logits.data[i] = saved + eps;
    const up = loss.compute(logits, labels, 0).lossSum / n;
    logits.data[i] = saved - eps;
    const down = loss.compute(logits, labels, 0).lossSum / n;
    logits.data[i] = saved;
    const numeric = (up - down) / (2 * eps);
    assert.ok(Math.abs(grad[i]! - numeric) < 1e-3, `dlogits[${i}]: ${grad[i]} vs ${numeric}`);
  }
});

const small: ModelSpec = {
  input: [6, 6, 1],
  layers: [
    {
      type: 'conv2d',
      filters: 3,
      kernelSize: [3, 3],
      strides: [1, 1],
      padding: 'same',
      activation: 'tanh',
      useBias: true,
    },
    { type: 'maxPool2d', poolSize: [2, 2], strides: [2, 2], padding: 'valid' },
    { type: 'batchNorm', momentum: 0.9, epsilon: 1e-5 },
    { type: 'flatten' },
    { type: 'dense', units: 8, activation: 'sigmoid', useBias: true, parallel: 'data' },
    { type: 'dropout', rate: 0.3, masks: 'per-sample' },
    { type: 'dense', units: 4, activation: 'linear', useBias: true, parallel: 'data' },
  ],
};

test('whole model: parameter gradients of the mean loss against finite differences', () => {
  const model = buildModel(B, small);
  model.initialize(2);
  const n = 3;
  const x = new Tensor([n, 6, 6, 1], randomArray(n * 36, 8));
  const labels = Int32Array.from([1, 3, 0]);
  const loss = new SoftmaxCrossEntropy(B);
  const meanLoss = () => loss.compute(model.forward(x, TRAIN_CTX), labels, 0).lossSum / n;
  model.zeroGrads();
  model.backward(loss.compute(model.forward(x, TRAIN_CTX), labels, 1 / n).dlogits);
  const analytic = model.grads.slice();
  // small ε: a larger one lets a perturbed conv weight change which element wins a max-pool window
  const eps = 1e-3;
  for (const e of model.paramEntries) {
    for (const k of [0, Math.floor(e.size / 2), e.size - 1]) {
      const i = e.offset + k;
      const saved = model.params[i]!;
      model.params[i] = saved + eps;
      const up = meanLoss();
      model.params[i] = saved - eps;
      const down = meanLoss();
      model.params[i] = saved;
      const numeric = (up - down) / (2 * eps);
      assert.ok(
        Math.abs(analytic[i]! - numeric) <= 2e-3 + 3e-2 * Math.abs(numeric),
        `${e.name}[${k}]: ${analytic[i]} vs ${numeric}`,
      );
    }
  }
});

test('model build: flat buffers are shared views, shapes are checked with the layer named', () => {
  const model = buildModel(B, small);
  assert.equal(model.paramEntries[0]!.name, 'layers.0.kernel');
  assert.ok(
    model.paramEntries.every((e) => e.offset % 16 === 0),
    'offsets aligned to 16 floats',
  );
  assert.equal(model.parameterCount, 3 * 9 + 3 + 3 * 2 + 27 * 8 + 8 + 8 * 4 + 4);
  model.params.fill(0.5);
  assert.equal(model.stateEntries.length, 2);
  assert.throws(
    () =>
      buildModel(B, {
        input: [28, 28, 1],
        layers: [{ type: 'dense', units: 3, activation: 'relu', useBias: true, parallel: 'data' }],
      }),
    /model\.layers\[0\] dense: expects a flat input .* add a flatten layer/,
  );
  assert.throws(
    () =>
      buildModel(B, {
        input: [4, 4, 1],
        layers: [
          {
            type: 'conv2d',
            filters: 1,
            kernelSize: [5, 5],
            strides: [1, 1],
            padding: 'valid',
            activation: 'relu',
            useBias: true,
          },
        ],
      }),
    /model\.layers\[0\] conv2d: kernel 5×5 is larger than its 4×4 input/,
  );
});

test('initialisation is deterministic in the seed and differs across seeds', () => {
  const a = buildModel(B, small),
    b = buildModel(B, small),
    c = buildModel(B, small);
  a.initialize(1);
  b.initialize(1);
  c.initialize(2);
  assert.deepEqual(a.params, b.params);
  assert.notDeepEqual(a.params, c.params);
});
