import { test } from 'node:test';
import assert from 'node:assert/strict';
import { jsBackend } from '../../src/kernels/js/index.ts';
import { Tensor } from '../../src/tensor/tensor.ts';
import { Dense } from '../../src/nn/dense.ts';
import { Conv2D } from '../../src/nn/conv2d.ts';
import { ActivationLayer } from '../../src/nn/activationLayer.ts';
import { SoftmaxLayer } from '../../src/nn/softmaxLayer.ts';
import { buildLayer } from '../../src/nn/buildLayer.ts';
import { SoftmaxCrossEntropy } from '../../src/nn/softmaxCrossEntropy.ts';
import { MeanSquaredError } from '../../src/nn/meanSquaredError.ts';
import { BinaryCrossEntropy } from '../../src/nn/binaryCrossEntropy.ts';
import type { Loss } from '../../src/nn/loss.ts';
import type { LayerSpec } from '../../src/nn/spec.ts';
import { gradCheckLayer } from './gradcheck.ts';
import { randomArray } from '../util/close.ts';

const B = jsBackend;
/** Inputs kept away from the kink at 0 (|x| ≥ 0.15). */
const awayFromKinks = (n: number, seed: number) => randomArray(n, seed).map((v) => (v >= 0 ? 0.15 + v : v - 0.15));

test('gelu, leakyRelu (default and 0.2 slope) and softmax layers against finite differences', () => {
  gradCheckLayer(B, new ActivationLayer(B, 'gelu', [11], 'gelu'), 3, { input: randomArray(33, 5).map((v) => 4 * v) });
  gradCheckLayer(B, new ActivationLayer(B, 'leakyRelu', [10], 'leakyRelu'), 3, {
    eps: 1e-3,
    input: awayFromKinks(30, 6),
  });
  gradCheckLayer(B, new ActivationLayer(B, 'leakyRelu 0.2', [10], 'leakyRelu', 0.2), 3, {
    eps: 1e-3,
    input: awayFromKinks(30, 7),
  });
  gradCheckLayer(B, new SoftmaxLayer(B, 'softmax', [7]), 3, { input: randomArray(21, 8).map((v) => 3 * v) });
  gradCheckLayer(B, new SoftmaxLayer(B, 'softmax over channels', [2, 2, 5]), 2);
});

test('gelu and leakyRelu fused into dense and conv2d against finite differences', () => {
  gradCheckLayer(B, new Dense(B, 'dense gelu', [6], 5, 'gelu', true), 3);
  gradCheckLayer(B, new Dense(B, 'dense leakyRelu', [6], 5, 'leakyRelu', true), 3, { eps: 1e-3 });
  gradCheckLayer(B, new Conv2D(B, 'conv gelu', [5, 5, 2], 3, [3, 3], [1, 1], 'same', 'gelu', true), 2);
  gradCheckLayer(B, new Conv2D(B, 'conv leakyRelu', [5, 4, 2], 3, [3, 3], [2, 1], 'same', 'leakyRelu', false), 2, {
    eps: 1e-3,
  });
});

const conv = (filters: number, kernel: number, strides = 1): LayerSpec => ({
  type: 'conv2d',
  filters,
  kernelSize: [kernel, kernel],
  strides: [strides, strides],
  padding: 'same',
  activation: 'linear',
  useBias: true,
});
const bn: LayerSpec = { type: 'batchNorm', momentum: 0.9, epsilon: 1e-5 };

test('residual block (conv–batchNorm–relu–conv, projection shortcut, relu after the add) against finite differences', () => {
  const spec: LayerSpec = {
    type: 'residual',
    activation: 'gelu',
    layers: [conv(4, 3, 2), bn, { type: 'tanh' }, conv(4, 3)],
    shortcut: [conv(4, 1, 2)],
  };
  const block = buildLayer(B, spec, 2, [6, 6, 3]);
  assert.deepEqual(block.outputShape, [3, 3, 4]);
  assert.deepEqual(
    block.params().map((p) => p.name),
    [
      'layers.0.kernel',
      'layers.0.bias',
      'layers.1.gamma',
      'layers.1.beta',
      'layers.3.kernel',
      'layers.3.bias',
      'shortcut.0.kernel',
      'shortcut.0.bias',
    ],
  );
  gradCheckLayer(B, block, 3, { eps: 1e-3, rtol: 3e-2 });
});

test('identity shortcut, add with three branches (dropout inside), and a block nested in a block against finite differences', () => {
  const identity: LayerSpec = {
    type: 'residual',
    activation: 'linear',
    layers: [{ type: 'dense', units: 5, activation: 'tanh', useBias: true, parallel: 'data' }],
    shortcut: [],
  };
  gradCheckLayer(B, buildLayer(B, identity, 0, [5]), 3);
  const add: LayerSpec = {
    type: 'add',
    activation: 'sigmoid',
    branches: [
      [{ type: 'dense', units: 4, activation: 'linear', useBias: true, parallel: 'data' }],
      [
        { type: 'dense', units: 6, activation: 'gelu', useBias: false, parallel: 'data' },
        { type: 'dropout', rate: 0.3, masks: 'per-sample' },
        { type: 'dense', units: 4, activation: 'linear', useBias: true, parallel: 'data' },
      ],
      [{ type: 'dense', units: 4, activation: 'sigmoid', useBias: true, parallel: 'data' }],
    ],
  };
  gradCheckLayer(B, buildLayer(B, add, 1, [3]), 4);
  const nested: LayerSpec = {
    type: 'residual',
    activation: 'tanh',
    layers: [identity, { type: 'dense', units: 5, activation: 'linear', useBias: true, parallel: 'data' }],
    shortcut: [],
  };
  gradCheckLayer(B, buildLayer(B, nested, 4, [5]), 2);
});

test('nested dropouts draw their own masks (not the same key as their block or each other)', () => {
  const drop: LayerSpec = { type: 'dropout', rate: 0.5, masks: 'per-sample' };
  const block = buildLayer(B, { type: 'add', activation: 'linear', branches: [[drop], [drop]] }, 0, [64]);
  const top = buildLayer(B, drop, 0, [64]);
  const x = new Tensor([1, 64], new Float32Array(64).fill(1));
  const [a, b] = (block.sublayers!() as (typeof top)[]).map((l) => [
    ...l.forward(x, { training: true, seed: 1, step: 0, sampleOffset: 0 }).data,
  ]);
  const c = [...top.forward(x, { training: true, seed: 1, step: 0, sampleOffset: 0 }).data];
  assert.notDeepEqual(a, b);
  assert.notDeepEqual(a, c);
});

test('block shapes that do not add up name the branch paths and suggest the projection', () => {
  const spec: LayerSpec = { type: 'residual', activation: 'relu', layers: [conv(8, 3, 2)], shortcut: [] };
  assert.throws(
    () => buildLayer(B, spec, 3, [8, 8, 4]),
    /model\.layers\[3\] residual: its branches must end in the same shape to be added, but model\.layers\[3\]\.residual\.layers ends in \[4, 4, 8\] and model\.layers\[3\]\.residual\.shortcut is the identity: \[8, 8, 4\]; project the shortcut, e\.g\. shortcut: \[ \{ conv2d: \{ filters: 8, kernelSize: 1, strides: 2 \} \} \]/,
  );
  const flat: LayerSpec = {
    type: 'residual',
    activation: 'linear',
    layers: [{ type: 'flatten' }, { type: 'dense', units: 3, activation: 'linear', useBias: true, parallel: 'data' }],
    shortcut: [],
  };
  assert.throws(
    () => buildLayer(B, { type: 'residual', activation: 'linear', layers: [flat], shortcut: [] }, 1, [4, 4, 1]),
    /^Error: model\.layers\[1\]\.residual\.layers\[0\] residual: its branches must end in the same shape to be added, but model\.layers\[1\]\.residual\.layers\[0\]\.residual\.layers ends in \[3\] and .*shortcut: \[ \{ flatten: \{\} \}, \{ dense: \{ units: 3 \} \} \]$/,
  );
  assert.throws(
    () =>
      buildLayer(
        B,
        {
          type: 'residual',
          activation: 'linear',
          layers: [{ type: 'dense', units: 3, activation: 'linear', useBias: true, parallel: 'data' }],
          shortcut: [],
        },
        5,
        [4, 4, 1],
      ),
    /model\.layers\[5\]\.residual\.layers\[0\] dense: expects a flat input/,
  );
});

/** Central differences of lossSum · gradScale w.r.t. the outputs against dlogits. */
function gradCheckLoss(loss: Loss, outputs: Tensor, labels: Int32Array, targets?: Float32Array): void {
  const scale = 1 / outputs.batch;
  const r = loss.compute(outputs, labels, scale, targets);
  const grad = r.dlogits.data.slice();
  const eps = 1e-2;
  for (let i = 0; i < outputs.size; i++) {
    const saved = outputs.data[i]!;
    outputs.data[i] = saved + eps;
    const up = loss.compute(outputs, labels, 0, targets).lossSum * scale;
    outputs.data[i] = saved - eps;
    const down = loss.compute(outputs, labels, 0, targets).lossSum * scale;
    outputs.data[i] = saved;
    const numeric = (up - down) / (2 * eps);
    assert.ok(
      Math.abs(grad[i]! - numeric) < 1e-3 + 1e-2 * Math.abs(numeric),
      `${loss.constructor.name} d/doutput[${i}]: ${grad[i]} vs ${numeric}`,
    );
  }
}

test('losses against finite differences: label-smoothed cross-entropy, MSE, BCE (multi-hot and soft targets)', () => {
  const n = 4,
    k = 5;
  const outputs = () =>
    new Tensor(
      [n, k],
      randomArray(n * k, 31).map((v) => 3 * v),
    );
  gradCheckLoss(new SoftmaxCrossEntropy(B, 0.2), outputs(), Int32Array.from([0, 4, 1, 1]));
  gradCheckLoss(new MeanSquaredError(B), outputs(), new Int32Array(n), randomArray(n * k, 32));
  const hot = Float32Array.from({ length: n * k }, (_, i) => ((i * 7) % 3 === 0 ? 1 : 0));
  gradCheckLoss(new BinaryCrossEntropy(B), outputs(), new Int32Array(n), hot);
  gradCheckLoss(
    new BinaryCrossEntropy(B),
    outputs(),
    new Int32Array(n),
    randomArray(n * k, 33).map((v) => 0.5 + 0.5 * v),
  );
});

test('loss metrics: MAE for regression, per-label accuracy and exact match for multi-label; missing targets are an error', () => {
  const y = new Tensor([2, 2], Float32Array.from([1, 2, 3, 4]));
  const mse = new MeanSquaredError(B).compute(y, new Int32Array(2), 0.5, Float32Array.from([1, 0, 3, 5]));
  assert.equal(mse.lossSum, 4 / 2 + 1 / 2);
  assert.equal(mse.absErrorSum, 2 / 2 + 1 / 2);
  assert.ok(Number.isNaN(mse.correct));
  const z = new Tensor([2, 2], Float32Array.from([2, -1, 3, 1]));
  const bce = new BinaryCrossEntropy(B).compute(z, new Int32Array(2), 0.5, Float32Array.from([1, 0, 1, 0]));
  assert.equal(bce.correct, 1 + 0.5);
  assert.equal(bce.exactMatches, 1);
  assert.throws(
    () => new MeanSquaredError(B).compute(y, new Int32Array(2), 1),
    /loss meanSquaredError: the batch has no targets/,
  );
  assert.throws(
    () => new BinaryCrossEntropy(B).compute(y, new Int32Array(2), 1, new Float32Array(2)),
    /gives 2 outputs per sample but the batch's targets hold 1 per sample/,
  );
});

test('a spatialSplit with gelu and leakyRelu (fused and as layers) equals the unsplit stack, forward and backward', async () => {
  const { buildModel } = await import('../../src/nn/model.ts');
  const stack: LayerSpec[] = [
    {
      type: 'conv2d',
      filters: 3,
      kernelSize: [3, 3],
      strides: [1, 1],
      padding: 'same',
      activation: 'gelu',
      useBias: true,
    },
    { type: 'leakyRelu', slope: 0.1 },
    {
      type: 'conv2d',
      filters: 2,
      kernelSize: [3, 3],
      strides: [2, 2],
      padding: 'same',
      activation: 'leakyRelu',
      useBias: true,
    },
    { type: 'gelu' },
  ];
  const plain = buildModel(B, { input: [7, 6, 2], layers: stack });
  const split = buildModel(B, {
    input: [7, 6, 2],
    layers: [{ type: 'spatialSplit', tiles: [2, 2], layers: stack as never }],
  });
  plain.initialize(4);
  split.initialize(4);
  assert.deepEqual([...split.params], [...plain.params], 'the same initial weights');
  const x = () => new Tensor([2, 7, 6, 2], randomArray(2 * 7 * 6 * 2, 12));
  const ctx = { training: true, seed: 1, step: 0, sampleOffset: 0 };
  const y = plain.forward(x(), ctx),
    ys = split.forward(x(), ctx);
  assert.ok(
    y.data.every((v, i) => Math.abs(v - ys.data[i]!) < 1e-6),
    'forward',
  );
  const dy = randomArray(y.size, 13);
  plain.zeroGrads();
  split.zeroGrads();
  plain.backward(new Tensor(y.shape, dy.slice()));
  split.backward(new Tensor(y.shape, dy.slice()));
  assert.ok(
    plain.grads.every((v, i) => Math.abs(v - split.grads[i]!) < 1e-5),
    'parameter gradients',
  );
});
