import assert from 'node:assert/strict';
import { Tensor } from '../../src/tensor/tensor.ts';
import type { Backend } from '../../src/kernels/backend.ts';
import type { ForwardContext, Layer } from '../../src/nn/layer.ts';
import { Sequential } from '../../src/nn/model.ts';
import { randomArray } from '../util/close.ts';

export const TRAIN_CTX: ForwardContext = { training: true, seed: 7, step: 3, sampleOffset: 11 };

/** Σ y·r in float64: a scalar whose gradient w.r.t. y is r. */
function project(y: Float32Array, r: Float32Array): number {
  let s = 0;
  for (let i = 0; i < y.length; i++) s += y[i]! * r[i]!;
  return s;
}

/** Up to `count` indices spread over [0, n), always including the first and last. */
function sampleIndices(n: number, count: number): number[] {
  if (n <= count) return [...Array(n).keys()];
  return [...Array(count).keys()].map((k) => Math.round((k * (n - 1)) / (count - 1)));
}

export interface GradCheckOptions {
  eps?: number;
  rtol?: number;
  atol?: number;
  samples?: number;
  ctx?: ForwardContext;
  /** input values; default uniform in [-1, 1) */
  input?: Float32Array;
  /** check dL/dinput (default true) */
  checkInput?: boolean;
}

/**
 * Central finite differences of f = Σ layer(x)·r against the layer's backward, for the input and
 * every parameter, at a spread of element positions.
 */
export function gradCheckLayer(backend: Backend, layer: Layer, batch: number, o: GradCheckOptions = {}): void {
  const { eps = 1e-2, rtol = 2e-2, atol = 2e-3, samples = 24, ctx = TRAIN_CTX, checkInput = true } = o;
  const model = new Sequential(backend, [layer], layer.inputShape);
  model.initialize(5);
  // non-trivial values everywhere, including biases and BatchNorm's gamma/beta
  model.params.set(randomArray(model.params.length, 99).map((v, i) => model.params[i]! + 0.3 * v));
  const xShape = [batch, ...layer.inputShape];
  const x = new Tensor(
    xShape,
    o.input ??
      randomArray(
        xShape.reduce((a, b) => a * b),
        17,
      ),
  );
  const y0 = layer.forward(x, ctx);
  const r = randomArray(y0.size, 23);
  model.zeroGrads();
  layer.forward(x, ctx);
  const dx = layer.backward(new Tensor(y0.shape, r.slice()), true);
  const analyticX = dx ? dx.data.slice() : null;
  const analyticP = model.grads.slice();
  const f = () => project(layer.forward(x, ctx).data, r);

  const check = (what: string, values: Float32Array, analytic: Float32Array, offset = 0, size = values.length) => {
    for (const k of sampleIndices(size, samples)) {
      const i = offset + k;
      const saved = values[i]!;
      values[i] = saved + eps;
      const fPlus = f();
      values[i] = saved - eps;
      const fMinus = f();
      values[i] = saved;
      const numeric = (fPlus - fMinus) / (2 * eps);
      const a = analytic[i]!;
      const tol = atol + rtol * Math.max(Math.abs(a), Math.abs(numeric));
      assert.ok(
        Math.abs(a - numeric) <= tol,
        `${layer.name} d/d${what}[${k}]: backward gives ${a}, finite differences ${numeric}`,
      );
    }
  };
  if (checkInput) {
    assert.ok(analyticX, `${layer.name}: backward returned no input gradient`);
    check('input', x.data, analyticX!);
  }
  for (const e of model.paramEntries) check(e.name, model.params, analyticP, e.offset, e.size);
}
