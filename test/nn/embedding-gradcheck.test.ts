import { test } from 'node:test';
import assert from 'node:assert/strict';
import { jsBackend } from '../../src/kernels/js/index.ts';
import { Tensor } from '../../src/tensor/tensor.ts';
import { Embedding } from '../../src/nn/embedding.ts';
import { PositionEncoding } from '../../src/nn/positionEncoding.ts';
import { TiedEmbedding } from '../../src/nn/tiedEmbedding.ts';
import { LayerNorm } from '../../src/nn/layerNorm.ts';
import { Dense } from '../../src/nn/dense.ts';
import { Sequential, buildModel } from '../../src/nn/model.ts';
import { TokenCrossEntropy } from '../../src/nn/tokenCrossEntropy.ts';
import { gradCheckLayer, TRAIN_CTX } from './gradcheck.ts';
import { randomArray } from '../util/close.ts';

const B = jsBackend;
const V = 7,
  T = 5,
  D = 6;
/** Token ids of `n` windows of T, as floats, repeating tokens (their rows' gradients add up). */
const ids = (n: number, seed: number) =>
  Float32Array.from(randomArray(n * T, seed), (v) => Math.floor(((v + 1) / 2) * V));

test('embedding, learned and sinusoidal position encodings against finite differences', () => {
  gradCheckLayer(B, new Embedding(B, 'embedding', [T], V, D), 3, { input: ids(3, 4), checkInput: false });
  gradCheckLayer(B, new PositionEncoding(B, 'learned', [T, D], 'learned'), 3);
  gradCheckLayer(B, new PositionEncoding(B, 'sinusoidal', [T, D], 'sinusoidal'), 3);
});

/** embedding → learned positions → layerNorm → tied projection: the shared weight gets both layers' gradients. */
function languageModel(): Sequential {
  const layers = [
    new Embedding(B, 'model.layers[0] embedding', [T], V, D),
    new PositionEncoding(B, 'model.layers[1] positionEncoding', [T, D], 'learned'),
    new LayerNorm(B, 'model.layers[2] layerNorm', [T, D], 1e-5),
    new TiedEmbedding(B, 'model.layers[3] tiedEmbedding', [T, D], V),
  ];
  const model = new Sequential(B, layers, [T]);
  model.initialize(3);
  model.params.set(randomArray(model.params.length, 8).map((v, i) => model.params[i]! + 0.5 * v));
  return model;
}

test('a tied model and the per-position cross-entropy: every parameter against finite differences of the mean loss', () => {
  const model = languageModel();
  const n = 3,
    x = new Tensor([n, T], ids(n, 5)),
    labels = Int32Array.from(ids(n, 6));
  const loss = new TokenCrossEntropy(B);
  // the mean over the N·T positions, as the loop reports it (lossSum / N)
  const meanLoss = () => loss.compute(model.forward(x, TRAIN_CTX), labels, 0).lossSum / n;
  model.zeroGrads();
  model.backward(loss.compute(model.forward(x, TRAIN_CTX), labels, 1 / n).dlogits);
  const analytic = model.grads.slice();
  const eps = 1e-2;
  for (const e of model.paramEntries) {
    for (let k = 0; k < e.size; k += 5) {
      const i = e.offset + k,
        saved = model.params[i]!;
      model.params[i] = saved + eps;
      const up = meanLoss();
      model.params[i] = saved - eps;
      const down = meanLoss();
      model.params[i] = saved;
      const numeric = (up - down) / (2 * eps);
      const tol = 2e-4 + 2e-2 * Math.abs(numeric);
      assert.ok(
        Math.abs(analytic[i]! - numeric) <= tol,
        `${e.name}[${k}]: backward ${analytic[i]}, finite differences ${numeric}`,
      );
    }
  }
});

test('tokenCrossEntropy: loss per position against float64, dlogits against finite differences', () => {
  const n = 2,
    t = 3,
    v = 4;
  const logits = new Tensor(
    [n, t, v],
    randomArray(n * t * v, 9).map((z) => 3 * z),
  );
  const labels = Int32Array.from([0, 3, 2, 1, 1, 0]);
  const loss = new TokenCrossEntropy(B);
  const r = loss.compute(logits, labels, 1 / n);
  let total = 0,
    right = 0;
  for (let p = 0; p < n * t; p++) {
    const row = [...logits.data.subarray(p * v, (p + 1) * v)];
    const max = Math.max(...row);
    total += max + Math.log(row.reduce((s, z) => s + Math.exp(z - max), 0)) - row[labels[p]!]!;
    if (row.indexOf(max) === labels[p]) right++;
  }
  // per sample the mean over its positions: lossSum / N is the mean over every position
  assert.ok(Math.abs(r.lossSum / n - total / (n * t)) < 1e-6, `loss ${r.lossSum / n} vs ${total / (n * t)}`);
  assert.equal(r.correct / n, right / (n * t));
  const grad = r.dlogits.data.slice(),
    eps = 1e-2;
  for (let i = 0; i < grad.length; i++) {
    const saved = logits.data[i]!;
    logits.data[i] = saved + eps;
    const up = loss.compute(logits, labels, 0).lossSum / n;
    logits.data[i] = saved - eps;
    const down = loss.compute(logits, labels, 0).lossSum / n;
    logits.data[i] = saved;
    const numeric = (up - down) / (2 * eps);
    assert.ok(Math.abs(grad[i]! - numeric) < 1e-4, `dlogits[${i}]: ${grad[i]} vs ${numeric}`);
  }
});

test('bucketed reductions: no layer announces the shared weight ready before both its gradients are in', () => {
  const model = languageModel();
  const n = 2,
    x = new Tensor([n, T], ids(n, 10)),
    labels = Int32Array.from(ids(n, 11));
  const dlogits = new TokenCrossEntropy(B).compute(model.forward(x, TRAIN_CTX), labels, 1 / n).dlogits;
  model.zeroGrads();
  const announced: { offset: number; grads: Float32Array }[] = [];
  model.backward(dlogits, (offset) => announced.push({ offset, grads: model.grads.slice(offset) }));
  assert.deepEqual(
    announced.map((a) => a.offset),
    model.gradientReadyOffsets,
  );
  // the embedding's weight is at offset 0: announced last, once the tied layer and the embedding have added
  assert.equal(announced.at(-1)!.offset, 0);
  for (const a of announced)
    assert.deepEqual(a.grads, model.grads.slice(a.offset), `grads[${a.offset}:] changed after announced`);
});

test('token ids that are not integers in 0..vocab−1 are refused, naming the layer, the sample and the position', () => {
  const layer = new Embedding(B, 'model.layers[0] embedding', [3], 5, 2);
  new Sequential(B, [layer], [3]).initialize(1);
  for (const bad of [1.5, -1, 5, Number.NaN]) {
    const x = new Tensor([2, 3], Float32Array.from([0, 1, 2, 3, 4, bad]));
    assert.throws(
      () => layer.forward(x, TRAIN_CTX),
      (e: Error) =>
        e.message.startsWith('model.layers[0] embedding: sample 1 of the batch holds') &&
        e.message.includes('at position 2') &&
        e.message.includes('0..4'),
    );
  }
});

test('padded positions (ForwardContext.lengths): ids unread, outputs zero, no gradient', () => {
  const model = languageModel();
  const lengths = Int32Array.from([5, 3]);
  const x = new Tensor([2, T], ids(2, 12));
  x.data.fill(-7, T + 3); // padding: not token ids
  const ctx = { ...TRAIN_CTX, lengths };
  const logits = model.forward(x, ctx);
  assert.ok(logits.data.subarray((T + 3) * V).every((v) => v === 0));
  model.zeroGrads();
  const dy = new Tensor(logits.shape, randomArray(logits.size, 13));
  model.backward(dy);
  const padded = model.grads.slice();
  // the same as the valid positions alone: sample 1's gradient from its first 3 positions only
  const valid = new Tensor(dy.shape, dy.data.slice().fill(0, (T + 3) * V));
  x.data.fill(0, T + 3);
  model.forward(x, ctx);
  model.zeroGrads();
  model.backward(valid);
  assert.deepEqual(model.grads, padded);
});

test('a tiedEmbedding is refused without one embedding before it, or with a width the embedding does not have', () => {
  const tied = (d = D) => new TiedEmbedding(B, 'model.layers[2] tiedEmbedding', [T, d], V);
  assert.throws(
    () => new Sequential(B, [new PositionEncoding(B, 'pe', [T, D], 'sinusoidal'), tied()], [T, D]),
    /model\.layers\[2\] tiedEmbedding: shares the weights of the model's embedding layer, but the model has none/,
  );
  assert.throws(
    () =>
      new Sequential(
        B,
        [new Embedding(B, 'emb', [T], V, D), new Dense(B, 'dense', [T, D], 4, 'linear', true), tied(4)],
        [T],
      ),
    /tiedEmbedding: shares the weight \[7, 6\] of emb, so it needs an input of 6 features/,
  );
});

test('built from a spec, the embedding starts from N(0, 0.02²) and the learned positions too', () => {
  const model = buildModel(B, {
    input: [64],
    layers: [
      { type: 'embedding', vocab: 65, dim: 128 },
      { type: 'positionEncoding', encoding: 'learned' },
      { type: 'tiedEmbedding', vocab: 65 },
    ],
  });
  model.initialize(1);
  assert.deepEqual(model.outputShape, [64, 65]);
  for (const e of model.paramEntries) {
    const w = model.params.subarray(e.offset, e.offset + e.size);
    const mean = w.reduce((s, v) => s + v, 0) / w.length;
    const std = Math.sqrt(w.reduce((s, v) => s + (v - mean) ** 2, 0) / w.length);
    assert.ok(Math.abs(mean) < 0.002 && Math.abs(std - 0.02) < 0.001, `${e.name}: mean ${mean}, std ${std}`);
  }
});
