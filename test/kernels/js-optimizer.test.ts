import { test } from 'node:test';
import assert from 'node:assert/strict';
import { assertClose } from '../util/close.ts';
import { adamStep, sgdStep } from '../../src/kernels/js/optimizerSteps.ts';
import type { AdamParams } from '../../src/kernels/optimizerKernels.ts';

const f32 = (v: number[]) => Float32Array.from(v);

test('Adam: first step moves each parameter by lr·sign(g); second step by hand', () => {
  const p = f32([1, -2]),
    m = new Float32Array(2),
    v = new Float32Array(2);
  const hp: AdamParams = { lr: 0.1, beta1: 0.9, beta2: 0.999, eps: 1e-8, weightDecay: 0, decoupled: false, step: 1 };
  adamStep(p, f32([0.5, -4]), m, v, hp);
  // step 1: m̂ = g, v̂ = g², update = lr·g/(|g| + eps)
  assertClose(m, [0.05, -0.4]);
  assertClose(v, [0.00025, 0.016]);
  assertClose(p, [1 - (0.1 * 0.5) / (0.5 + 1e-8), -2 + (0.1 * 4) / (4 + 1e-8)]);
  // step 2 with g = [0.1, 1]: m = [0.055, −0.26], v = [0.00025·0.999 + 0.001·0.01, 0.016·0.999 + 0.001]
  adamStep(p, f32([0.1, 1]), m, v, { ...hp, step: 2 });
  const m2 = [0.045 + 0.01, -0.36 + 0.1],
    v2 = [0.00024975 + 0.00001, 0.015984 + 0.001];
  assertClose(m, m2);
  assertClose(v, v2);
  const p1 = [0.9, -1.9];
  const want = [0, 1].map((i) => p1[i] - (0.1 * (m2[i] / (1 - 0.81))) / (Math.sqrt(v2[i] / (1 - 0.998001)) + 1e-8));
  // want ≈ [0.80228, −2.00118]: hand check of the first: 0.055/0.19 = 0.28947, √(0.00025975/0.001999) = 0.36047
  assertClose([want[0]], [0.9 - (0.1 * 0.28947368) / 0.36047], { rtol: 1e-4 });
  assertClose(p, want);
});

test('Adam with L2 (torch.optim.Adam weight_decay) and AdamW (decoupled), three steps vs float64', () => {
  const grads = [
    [0.3, -0.2, 0],
    [0.1, 0.4, -0.5],
    [-0.25, 0.05, 0.2],
  ];
  for (const decoupled of [false, true]) {
    const hp = { lr: 0.01, beta1: 0.8, beta2: 0.95, eps: 1e-6, weightDecay: 0.1, decoupled };
    const p = f32([0.5, -1, 2]),
      m = new Float32Array(3),
      v = new Float32Array(3);
    // float64 model of the same update
    const P = [0.5, -1, 2],
      M = [0, 0, 0],
      V = [0, 0, 0];
    grads.forEach((g, s) => {
      const t = s + 1;
      adamStep(p, f32(g), m, v, { ...hp, step: t });
      for (let i = 0; i < 3; i++) {
        const gi = decoupled ? g[i] : g[i] + 0.1 * P[i];
        if (decoupled) P[i] -= 0.01 * 0.1 * P[i];
        M[i] = 0.8 * M[i] + 0.2 * gi;
        V[i] = 0.95 * V[i] + 0.05 * gi * gi;
        P[i] -= (0.01 * (M[i] / (1 - 0.8 ** t))) / (Math.sqrt(V[i] / (1 - 0.95 ** t)) + 1e-6);
      }
      assertClose(p, P, { what: `decoupled=${decoupled} step ${t} params` });
      assertClose(m, M, { what: `decoupled=${decoupled} step ${t} m` });
      assertClose(v, V, { what: `decoupled=${decoupled} step ${t} v` });
    });
  }
  // One L2 step by hand: p = 2, g = 0 → g' = 0.2, update = lr·sign = 0.01 (eps aside); AdamW: p·(1 − 0.001) − 0 = 1.998.
  const a = f32([2]),
    b = f32([2]);
  adamStep(a, f32([0]), new Float32Array(1), new Float32Array(1), {
    lr: 0.01,
    beta1: 0.9,
    beta2: 0.999,
    eps: 0,
    weightDecay: 0.1,
    decoupled: false,
    step: 1,
  });
  adamStep(b, f32([0]), new Float32Array(1), new Float32Array(1), {
    lr: 0.01,
    beta1: 0.9,
    beta2: 0.999,
    eps: 1e-8,
    weightDecay: 0.1,
    decoupled: true,
    step: 1,
  });
  assertClose(a, [1.99]);
  assertClose(b, [1.998]);
});

test('SGD: plain, weight decay, momentum and Nesterov against hand-computed steps', () => {
  // plain: p = 1 − 0.1·(0.5 + 0.01·1) = 0.949
  const p0 = f32([1]);
  sgdStep(p0, f32([0.5]), null, { lr: 0.1, momentum: 0, nesterov: false, weightDecay: 0.01 });
  assertClose(p0, [0.949]);

  // momentum 0.9, lr 0.1, no decay, g = 1, 1, 1: v = 1, 1.9, 2.71; p = 1 − 0.1, −0.19, −0.271
  const p1 = f32([1]),
    v1 = new Float32Array(1);
  const want1 = [
    [1, 0.9],
    [1.9, 0.71],
    [2.71, 0.439],
  ];
  for (const [v, p] of want1) {
    sgdStep(p1, f32([1]), v1, { lr: 0.1, momentum: 0.9, nesterov: false, weightDecay: 0 });
    assertClose(v1, [v]);
    assertClose(p1, [p]);
  }

  // Nesterov, same: step = g + 0.9·v = 1.9, 2.71, 3.439; p = 0.81, 0.539, 0.1951
  const p2 = f32([1]),
    v2 = new Float32Array(1);
  for (const [v, p] of [
    [1, 0.81],
    [1.9, 0.539],
    [2.71, 0.1951],
  ]) {
    sgdStep(p2, f32([1]), v2, { lr: 0.1, momentum: 0.9, nesterov: true, weightDecay: 0 });
    assertClose(v2, [v]);
    assertClose(p2, [p], { rtol: 1e-5, atol: 1e-6 });
  }

  // Nesterov with decay 0.5, lr 0.1, momentum 0.5, p = 2, g = 0:
  // step 1: g' = 1, v = 1, step = 1.5, p = 1.85; step 2: g' = 0.925, v = 1.425, step = 1.6375, p = 1.68625
  const p3 = f32([2]),
    v3 = new Float32Array(1);
  sgdStep(p3, f32([0]), v3, { lr: 0.1, momentum: 0.5, nesterov: true, weightDecay: 0.5 });
  assertClose(p3, [1.85]);
  assertClose(v3, [1]);
  sgdStep(p3, f32([0]), v3, { lr: 0.1, momentum: 0.5, nesterov: true, weightDecay: 0.5 });
  assertClose(p3, [1.68625]);
  assertClose(v3, [1.425]);

  assert.throws(
    () => sgdStep(f32([1]), f32([1]), null, { lr: 0.1, momentum: 0.9, nesterov: false, weightDecay: 0 }),
    /velocity/,
  );
});
