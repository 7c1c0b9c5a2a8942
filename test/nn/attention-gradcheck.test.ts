import { test } from 'node:test';
import assert from 'node:assert/strict';
import { jsBackend } from '../../src/kernels/js/index.ts';
import { Tensor } from '../../src/tensor/tensor.ts';
import { Attention, type AttentionOptions } from '../../src/nn/attention.ts';
import { buildLayer } from '../../src/nn/buildLayer.ts';
import { Sequential } from '../../src/nn/model.ts';
import type { ForwardContext } from '../../src/nn/layer.ts';
import type { LayerSpec } from '../../src/nn/spec.ts';
import { gradCheckLayer, TRAIN_CTX } from './gradcheck.ts';
import { randomArray } from '../util/close.ts';

const B = jsBackend;
const [N, T, D] = [3, 5, 8];
const LENGTHS = Int32Array.from([5, 2, 4]);
const withLengths: ForwardContext = { ...TRAIN_CTX, lengths: LENGTHS };
const attention = (o: Partial<AttentionOptions> = {}) =>
  new Attention(B, 'attention', [T, D], { heads: 2, causal: true, dropout: 0, ...o }, 4);

/** The layer with initialised, perturbed parameters (as gradCheckLayer sets them), ready to run. */
function ready(o: Partial<AttentionOptions> = {}): Attention {
  const layer = attention(o);
  const model = new Sequential(B, [layer], layer.inputShape);
  model.initialize(5);
  model.params.set(randomArray(model.params.length, 99).map((v, i) => model.params[i]! + 0.3 * v));
  return layer;
}

for (const causal of [true, false]) {
  for (const ctx of [TRAIN_CTX, withLengths]) {
    const what = `causal ${causal}, ${ctx.lengths ? 'padded to lengths 5, 2, 4' : 'no padding'}`;
    test(`attention against finite differences: input and every parameter, ${what}`, () => {
      gradCheckLayer(B, attention({ causal }), N, { ctx, eps: 1e-3 });
      gradCheckLayer(B, attention({ causal, heads: 4 }), N, { ctx, eps: 1e-3 });
    });
  }
}

test('attention with dropout on its weights against finite differences (the masks are the same on every forward)', () => {
  gradCheckLayer(B, attention({ dropout: 0.3 }), N, { ctx: withLengths, eps: 1e-3 });
  gradCheckLayer(B, attention({ dropout: 0.3, causal: false }), N, { eps: 1e-3 });
});

test('attention dropout: masks only while training, the same for the same (seed, step, sample), new for a new step', () => {
  const layer = ready({ dropout: 0.5 });
  const x = new Tensor([N, T, D], randomArray(N * T * D, 3));
  const run = (ctx: ForwardContext) => layer.forward(x, ctx).data.slice();
  const plain = ready({ dropout: 0 });
  const evaluation = { ...TRAIN_CTX, training: false };
  assert.deepEqual(run(evaluation), plain.forward(x, evaluation).data.slice());
  assert.deepEqual(run(TRAIN_CTX), run(TRAIN_CTX));
  assert.notDeepEqual(run(TRAIN_CTX), run(evaluation));
  assert.notDeepEqual(run(TRAIN_CTX), run({ ...TRAIN_CTX, step: TRAIN_CTX.step + 1 }));
});

/** Output frames [from, to) of sample n, flattened. */
const frames = (y: Float32Array, n: number, from: number, to: number) =>
  Array.from(y.subarray((n * T + from) * D, (n * T + to) * D));

test('causal: changing frame t never changes an earlier frame of any sample, and does change frame t', () => {
  const layer = ready();
  const x0 = randomArray(N * T * D, 5);
  const y0 = layer.forward(new Tensor([N, T, D], x0), TRAIN_CTX).data.slice();
  for (let n = 0; n < N; n++) {
    for (let t = 0; t < T; t++) {
      const x = x0.slice();
      for (let f = 0; f < D; f++) x[(n * T + t) * D + f] += 0.5 + f;
      const y = layer.forward(new Tensor([N, T, D], x), TRAIN_CTX).data;
      assert.deepEqual(frames(y, n, 0, t), frames(y0, n, 0, t), `sample ${n}: frames before ${t} changed`);
      assert.notDeepEqual(frames(y, n, t, t + 1), frames(y0, n, t, t + 1), `sample ${n}: frame ${t} did not change`);
      for (let m = 0; m < N; m++) if (m !== n) assert.deepEqual(frames(y, m, 0, T), frames(y0, m, 0, T));
    }
  }
});

test('without causal, changing any frame changes the earlier frames too', () => {
  const layer = ready({ causal: false });
  const x0 = randomArray(N * T * D, 5);
  const y0 = layer.forward(new Tensor([N, T, D], x0), TRAIN_CTX).data.slice();
  const x = x0.slice();
  for (let f = 0; f < D; f++) x[(T - 1) * D + f] += 0.5;
  const y = layer.forward(new Tensor([N, T, D], x), TRAIN_CTX).data;
  assert.notDeepEqual(frames(y, 0, 0, 1), frames(y0, 0, 0, 1));
});

test('padding: padded frames never change a valid output, whatever they hold (NaN, 1e30), and output 0', () => {
  for (const causal of [true, false]) {
    const layer = ready({ causal, dropout: 0.2 });
    const x0 = randomArray(N * T * D, 8);
    const y0 = layer.forward(new Tensor([N, T, D], x0), withLengths).data.slice();
    for (const fill of [Number.NaN, 1e30, -3]) {
      const x = x0.slice();
      for (let n = 0; n < N; n++) x.fill(fill, (n * T + LENGTHS[n]!) * D, (n + 1) * T * D);
      const y = layer.forward(new Tensor([N, T, D], x), withLengths).data;
      assert.deepEqual(Array.from(y), Array.from(y0), `causal ${causal}: padded frames filled with ${fill}`);
    }
    for (let n = 0; n < N; n++) assert.ok(frames(y0, n, LENGTHS[n]!, T).every((v) => v === 0));
    // a valid frame does change the outputs
    const x = x0.slice();
    x[0] += 1;
    assert.notDeepEqual(Array.from(layer.forward(new Tensor([N, T, D], x), withLengths).data), Array.from(y0));
  }
});

test('heads must divide the features: the error names the layer and the head counts that fit', () => {
  assert.throws(
    () => new Attention(B, 'model.layers[2] attention', [T, 6], { heads: 4, causal: true, dropout: 0 }, 2),
    /^Error: model\.layers\[2\] attention: heads: 4 does not divide the 6 features .*use heads: 1, 2, 3, 6/,
  );
  assert.throws(
    () => new Attention(B, 'model.layers[0] attention', [12], { heads: 2, causal: true, dropout: 0 }, 0),
    /model\.layers\[0\] attention: expects a sequence \[frames, features\] but receives shape \[12\]/,
  );
});

const block = (o: Partial<{ heads: number; mlp: number; dropout: number; causal: boolean }> = {}): LayerSpec => ({
  type: 'transformerBlock',
  heads: 2,
  dropout: 0,
  causal: true,
  ...o,
});

test('transformerBlock: two residual blocks, parameters named attn.… and mlp.…, mlp 4·D by default', () => {
  const layer = buildLayer(B, block(), 2, [T, D]);
  assert.deepEqual(layer.outputShape, [T, D]);
  assert.deepEqual(
    layer.params().map((p) => `${p.name} [${p.shape.join(', ')}]`),
    [
      'attn.layers.0.gamma [8]',
      'attn.layers.0.beta [8]',
      'attn.layers.1.in_proj_weight [24, 8]',
      'attn.layers.1.in_proj_bias [24]',
      'attn.layers.1.out_proj.weight [8, 8]',
      'attn.layers.1.out_proj.bias [8]',
      'mlp.layers.0.gamma [8]',
      'mlp.layers.0.beta [8]',
      'mlp.layers.1.kernel [8, 32]',
      'mlp.layers.1.bias [32]',
      'mlp.layers.2.kernel [32, 8]',
      'mlp.layers.2.bias [8]',
    ],
  );
  // dropout adds layers after the parameterised ones: the names stay
  assert.deepEqual(
    buildLayer(B, block({ dropout: 0.1, mlp: 12 }), 2, [T, D])
      .params()
      .map((p) => p.name),
    layer.params().map((p) => p.name),
  );
  assert.deepEqual(
    layer.sublayers!().flatMap((l) => l.sublayers!().map((s) => s.name)),
    [
      'model.layers[2].transformerBlock.attn.residual.layers[0] layerNorm',
      'model.layers[2].transformerBlock.attn.residual.layers[1] attention',
      'model.layers[2].transformerBlock.mlp.residual.layers[0] layerNorm',
      'model.layers[2].transformerBlock.mlp.residual.layers[1] dense',
      'model.layers[2].transformerBlock.mlp.residual.layers[2] dense',
    ],
  );
});

test('transformerBlock against finite differences: input and every parameter, with and without padding and dropout', () => {
  gradCheckLayer(B, buildLayer(B, block({ mlp: 12 }), 1, [T, D]), N, { eps: 1e-3, rtol: 3e-2 });
  gradCheckLayer(B, buildLayer(B, block({ mlp: 12, dropout: 0.2 }), 1, [T, D]), N, {
    ctx: withLengths,
    eps: 1e-3,
    rtol: 3e-2,
  });
});

test('transformerBlock refuses heads that do not divide the width, naming the block', () => {
  assert.throws(
    () => buildLayer(B, block({ heads: 3 }), 2, [T, D]),
    /^Error: model\.layers\[2\] transformerBlock: heads: 3 does not divide the 8 features .*use heads: 1, 2, 4, 8/,
  );
});
