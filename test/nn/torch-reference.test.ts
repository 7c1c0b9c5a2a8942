import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { jsBackend } from '../../src/kernels/js/index.ts';
import { createWasmBackend } from '../../src/kernels/wasm/index.ts';
import { backwardReadsInput, type ActivationKind } from '../../src/kernels/activation.ts';
import type { Backend } from '../../src/kernels/backend.ts';
import { Tensor } from '../../src/tensor/tensor.ts';
import { SoftmaxCrossEntropy } from '../../src/nn/softmaxCrossEntropy.ts';
import { MeanSquaredError } from '../../src/nn/meanSquaredError.ts';
import { BinaryCrossEntropy } from '../../src/nn/binaryCrossEntropy.ts';
import { SoftmaxLayer } from '../../src/nn/softmaxLayer.ts';
import { clipToNorm, sumOfSquares } from '../../src/optim/clipGradNorm.ts';
import { assertClose } from '../util/close.ts';
import { TRAIN_CTX } from './gradcheck.ts';

// Values from PyTorch (fixtures/torch-reference.py, which writes fixtures/torch-reference.json).
const ref = JSON.parse(readFileSync(new URL('./fixtures/torch-reference.json', import.meta.url), 'utf8'));
const f32 = (v: number[]) => Float32Array.from(v);
const TOL = { rtol: 1e-5, atol: 1e-6 };
const wasm = await createWasmBackend();
const backends: Backend[] = wasm ? [jsBackend, wasm] : [jsBackend];

test('softmaxCrossEntropy with label smoothing 0, 0.1, 0.3 equals F.cross_entropy(label_smoothing=ε)', () => {
  const { logits, shape, labels, cases } = ref.softmaxCrossEntropy;
  const n = shape[0];
  for (const b of backends) {
    for (const c of cases) {
      const r = new SoftmaxCrossEntropy(b, c.labelSmoothing).compute(
        new Tensor(shape, f32(logits)),
        Int32Array.from(labels),
        1 / n,
      );
      assertClose([r.lossSum / n], [c.loss], { ...TOL, what: `${b.name} loss ε=${c.labelSmoothing}` });
      assertClose(r.dlogits.data, c.grad, { ...TOL, what: `${b.name} gradient ε=${c.labelSmoothing}` });
    }
  }
});

test('meanSquaredError equals F.mse_loss (mean over every element)', () => {
  const { outputs, targets, shape, loss, grad } = ref.meanSquaredError;
  const r = new MeanSquaredError(jsBackend).compute(
    new Tensor(shape, f32(outputs)),
    new Int32Array(shape[0]),
    1 / shape[0],
    f32(targets),
  );
  assertClose([r.lossSum / shape[0]], [loss], { ...TOL, what: 'mse loss' });
  assertClose(r.dlogits.data, grad, { ...TOL, what: 'mse gradient' });
});

test('binaryCrossEntropy equals F.binary_cross_entropy_with_logits, multi-hot and soft targets, logits up to ±100', () => {
  const { logits, shape, cases } = ref.binaryCrossEntropy;
  for (const c of cases) {
    const r = new BinaryCrossEntropy(jsBackend).compute(
      new Tensor(shape, f32(logits)),
      new Int32Array(shape[0]),
      1 / shape[0],
      f32(c.targets),
    );
    assert.ok(Number.isFinite(r.lossSum), 'finite at large logits');
    assertClose([r.lossSum / shape[0]], [c.loss], { ...TOL, what: 'bce loss' });
    assertClose(r.dlogits.data, c.grad, { ...TOL, what: 'bce gradient' });
  }
});

test('gelu (exact, approximate=none) and leakyRelu (slopes 0.01, 0.2) equal PyTorch, js and wasm', () => {
  const { x, r, cases } = ref.activations;
  for (const b of backends) {
    for (const c of cases) {
      const [name, slope] = c.name.split(':') as [ActivationKind, string | undefined];
      const xs = f32(x),
        y = new Float32Array(xs.length),
        dx = new Float32Array(xs.length);
      b.activationForward(name, xs, y, slope ? Number(slope) : undefined);
      assertClose(y, c.y, { rtol: 2e-6, atol: 1e-7, what: `${b.name} ${c.name} forward` });
      b.activationBackward(name, backwardReadsInput(name) ? xs : y, f32(r), dx, slope ? Number(slope) : undefined);
      assertClose(dx, c.grad, { rtol: 2e-6, atol: 1e-7, what: `${b.name} ${c.name} backward` });
    }
  }
});

test('softmax layer equals F.softmax(dim=-1), forward and backward', () => {
  const { x, r, shape, y, grad } = ref.softmax;
  const layer = new SoftmaxLayer(jsBackend, 'softmax', [shape[1]]);
  const out = layer.forward(new Tensor(shape, f32(x)), TRAIN_CTX);
  assertClose(out.data, y, { ...TOL, what: 'softmax forward' });
  assertClose(layer.backward(new Tensor(shape, f32(r))).data, grad, { ...TOL, what: 'softmax backward' });
});

test('clipping by global norm equals torch.nn.utils.clip_grad_norm_ (norm returned, gradients scaled when over)', () => {
  const { grads, cases } = ref.clipGradNorm;
  for (const c of cases) {
    const bufs = grads.map((g: number[]) => f32(g));
    const norm = Math.sqrt(bufs.reduce((s: number, g: Float32Array) => s + sumOfSquares(g), 0));
    assertClose([norm], [c.norm], { ...TOL, what: 'norm' });
    assert.equal(clipToNorm(bufs, norm, c.maxNorm), c.maxNorm < c.norm);
    for (const [k, g] of bufs.entries())
      assertClose(g, c.clipped[k], { ...TOL, what: `clipped ${k} (max ${c.maxNorm})` });
  }
  // a non-finite norm is a bad step: nothing is scaled
  const g = Float32Array.from([1, 2]);
  assert.equal(clipToNorm([g], NaN, 1), false);
  assert.equal(clipToNorm([g], Infinity, 1), false);
  assert.deepEqual([...g], [1, 2]);
});
