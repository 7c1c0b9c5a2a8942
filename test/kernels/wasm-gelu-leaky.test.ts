import { test } from 'node:test';
import assert from 'node:assert/strict';
import { randomArray } from '../util/close.ts';
import { jsBackend } from '../../src/kernels/js/index.ts';
import { normalCdf } from '../../src/kernels/js/elementwise.ts';
import { wasmBackend, Placer, PLACEMENTS, assertCloseNaN } from './wasmHelpers.ts';
import type { ActivationKind } from '../../src/kernels/activation.ts';

const b = await wasmBackend();
const LENGTHS = [1, 3, 4, 7, 33, 129, 1000];

test('wasm gelu and leakyRelu match js (NaN propagates, default and given slope, in place, dx = dy)', () => {
  let seed = 500;
  for (const kind of ['gelu', 'leakyRelu'] as ActivationKind[])
    for (const n of LENGTHS)
      for (const slope of [undefined, 0.3]) {
        const x = randomArray(n, seed++).map((v) => v * 6);
        if (n > 5) x[5] = NaN;
        const wy = new Float32Array(n);
        jsBackend.activationForward(kind, x, wy, slope);
        // gelu's backward reads the input, leakyRelu's the output
        const saved = kind === 'gelu' ? x : wy;
        const dy = randomArray(n, seed++);
        const wdx = new Float32Array(n);
        jsBackend.activationBackward(kind, saved, dy, wdx, slope);
        for (const where of PLACEMENTS) {
          const p = new Placer(b, where);
          const what = `${kind} n=${n} slope=${slope} ${where}`;
          const y = p.f32(new Float32Array(n));
          b.activationForward(kind, p.f32(x), y, slope);
          assertCloseNaN(y, wy, { rtol: 1e-6, atol: 1e-7, what: `forward ${what}` });
          const inplace = p.f32(x);
          b.activationForward(kind, inplace, inplace, slope);
          assertCloseNaN(inplace, wy, { rtol: 1e-6, atol: 1e-7, what: `forward in place ${what}` });
          const dx = p.f32(new Float32Array(n));
          b.activationBackward(kind, p.f32(saved), p.f32(dy), dx, slope);
          assertCloseNaN(dx, wdx, { rtol: 1e-6, atol: 1e-7, what: `backward ${what}` });
          const alias = p.f32(dy);
          b.activationBackward(kind, p.f32(saved), alias, alias, slope);
          assertCloseNaN(alias, wdx, { rtol: 1e-6, atol: 1e-7, what: `backward dx = dy ${what}` });
        }
      }
});

test('leakyRelu: slope applies below 0 (and at 0 in backward), default 0.01; gelu saturates without NaN', () => {
  const x = Float32Array.from([-2, -0.5, 0, 0.5, 3]);
  const y = new Float32Array(5),
    dx = new Float32Array(5);
  for (const backend of [jsBackend, b]) {
    backend.activationForward('leakyRelu', x, y);
    assert.deepEqual([...y], [-0.02, -0.005, 0, 0.5, 3].map(Math.fround));
    backend.activationBackward('leakyRelu', y, Float32Array.from([1, 1, 1, 1, 1]), dx, 0.25);
    assert.deepEqual([...dx], [0.25, 0.25, 0.25, 1, 1]);
    backend.activationForward('gelu', Float32Array.from([-1e4, -40, 40, 1e4, 0]), y);
    assert.deepEqual(
      [...y].map((v) => (Object.is(v, -0) ? 0 : v)),
      [0, 0, 40, 1e4, 0],
    );
  }
});

test('normalCdf: Φ against independent references to 1.2e-7 relative, lower tail included', () => {
  const phi = (x: number) => Math.exp(-0.5 * x * x) / Math.sqrt(2 * Math.PI);
  // |x| ≤ 3: Φ(x) = ½ + φ(x)·Σ x^(2k+1)/(1·3·…·(2k+1)); below: Laplace's continued fraction
  // Φ(x) = φ(x)/(t + 1/(t + 2/(t + 3/(t + …)))), t = −x, which has no cancellation there
  const reference = (x: number) => {
    if (x < -3) {
      let f = -x;
      for (let k = 200; k >= 1; k--) f = -x + k / f;
      return phi(x) / f;
    }
    let term = x,
      sum = x;
    for (let k = 1; k < 400; k++) {
      term *= (x * x) / (2 * k + 1);
      sum += term;
    }
    return 0.5 + phi(x) * sum;
  };
  for (let x = -8; x <= 6; x += 0.0625) {
    const want = reference(x);
    assert.ok(Math.abs(normalCdf(x) - want) <= 1.2e-7 * want + 1e-300, `Φ(${x}) = ${normalCdf(x)}, expected ${want}`);
  }
});
