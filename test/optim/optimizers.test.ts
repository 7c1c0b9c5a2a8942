import { test } from 'node:test';
import assert from 'node:assert/strict';
import { jsBackend } from '../../src/kernels/js/index.ts';
import { createOptimizer } from '../../src/optim/optimizer.ts';
import { learningRateAt } from '../../src/optim/schedule.ts';
import { assertClose } from '../util/close.ts';

const B = jsBackend;

test('SGD: plain, momentum, Nesterov, weight decay (hand-computed)', () => {
  // plain: p = 1 − 0.1·0.5 = 0.95
  let p = Float32Array.of(1),
    g = Float32Array.of(0.5);
  createOptimizer(B, { type: 'sgd', lr: 0.1, momentum: 0, nesterov: false, weightDecay: 0 }, 1).step(p, g, 0.1);
  assertClose(p, [0.95]);
  // momentum 0.9, g = 1 twice: v1 = 1, p1 = 0.9; v2 = 1.9, p2 = 0.9 − 0.19 = 0.71
  p = Float32Array.of(1);
  g = Float32Array.of(1);
  const m = createOptimizer(B, { type: 'sgd', lr: 0.1, momentum: 0.9, nesterov: false, weightDecay: 0 }, 1);
  m.step(p, g, 0.1);
  assertClose(p, [0.9]);
  m.step(p, g, 0.1);
  assertClose(p, [0.71]);
  // Nesterov: v1 = 1, step = 1 + 0.9 = 1.9 → p1 = 0.81; v2 = 1.9, step = 1 + 1.71 = 2.71 → p2 = 0.539
  p = Float32Array.of(1);
  const n = createOptimizer(B, { type: 'sgd', lr: 0.1, momentum: 0.9, nesterov: true, weightDecay: 0 }, 1);
  n.step(p, g, 0.1);
  assertClose(p, [0.81]);
  n.step(p, g, 0.1);
  assertClose(p, [0.539]);
  // weight decay 0.1: g' = 1 + 0.1·2 = 1.2 → p = 2 − 0.12 = 1.88
  p = Float32Array.of(2);
  createOptimizer(B, { type: 'sgd', lr: 0.1, momentum: 0, nesterov: false, weightDecay: 0.1 }, 1).step(p, g, 0.1);
  assertClose(p, [1.88]);
});

test('Adam and AdamW (hand-computed, with bias correction)', () => {
  // step 1: m = 0.1·g, v = 0.001·g², m̂ = g, v̂ = g² → p −= lr·g/(|g|+eps) ≈ lr·sign(g)
  const p = Float32Array.of(1, -1),
    g = Float32Array.of(2, -0.5);
  const adam = createOptimizer(B, { type: 'adam', lr: 0.01, beta1: 0.9, beta2: 0.999, eps: 1e-8, weightDecay: 0 }, 2);
  adam.step(p, g, 0.01);
  assertClose(p, [0.99, -0.99], { rtol: 1e-6 });
  // step 2 with g = (1, 1): m = (0.9·0.2 + 0.1, 0.9·−0.05 + 0.1) = (0.28, 0.055);
  // v = (0.999·0.004 + 0.001, 0.999·0.00025 + 0.001) = (0.004996, 0.00124975)
  // m̂ = m/0.19, v̂ = v/0.001999
  g.set([1, 1]);
  adam.step(p, g, 0.01);
  const upd = (m: number, v: number) => (0.01 * (m / 0.19)) / (Math.sqrt(v / 0.001999) + 1e-8);
  assertClose(p, [0.99 - upd(0.28, 0.004996), -0.99 - upd(0.055, 0.00124975)], { rtol: 1e-5 });
  assert.equal(adam.stepCount, 2);
  // AdamW decays the weight before the update: p = 1 − 0.01·0.1·1 − 0.01 = 0.989
  const w = Float32Array.of(1);
  createOptimizer(B, { type: 'adamw', lr: 0.01, beta1: 0.9, beta2: 0.999, eps: 1e-8, weightDecay: 0.1 }, 1).step(
    w,
    Float32Array.of(3),
    0.01,
  );
  assertClose(w, [0.989], { rtol: 1e-6 });
  // Adam's L2 adds wd·p to the gradient: with g = 0 and wd = 0.1 the update is still ≈ lr·sign(p)
  const l2 = Float32Array.of(1);
  createOptimizer(B, { type: 'adam', lr: 0.01, beta1: 0.9, beta2: 0.999, eps: 1e-8, weightDecay: 0.1 }, 1).step(
    l2,
    Float32Array.of(0),
    0.01,
  );
  assertClose(l2, [0.99], { rtol: 1e-6 });
});

test('optimizer state round-trips through state()/loadState()', () => {
  const a = createOptimizer(B, { type: 'adam', lr: 0.01, beta1: 0.9, beta2: 0.999, eps: 1e-8, weightDecay: 0 }, 3);
  const pa = Float32Array.of(1, 2, 3),
    g = Float32Array.of(0.1, -0.2, 0.3);
  a.step(pa, g, 0.01);
  const b = createOptimizer(B, a.spec, 3);
  b.loadState(a.state());
  const pb = pa.slice();
  a.step(pa, g, 0.01);
  b.step(pb, g, 0.01);
  assert.deepEqual(pa, pb);
  const sgd = createOptimizer(B, { type: 'sgd', lr: 0.1, momentum: 0.9, nesterov: false, weightDecay: 0 }, 3);
  assert.throws(() => sgd.loadState(a.state()), /no 'velocity' buffer/);
});

test('schedules: warmup, step decay, cosine', () => {
  const none = { warmupSteps: 0, decay: { type: 'none' as const } };
  assert.equal(learningRateAt(50, 0.1, none, 100), 0.1);
  const warm = { warmupSteps: 4, decay: { type: 'none' as const } };
  assertClose(
    [0, 1, 2, 3, 4, 9].map((s) => learningRateAt(s, 0.1, warm, 100)),
    [0.025, 0.05, 0.075, 0.1, 0.1, 0.1],
  );
  const step = { warmupSteps: 0, decay: { type: 'step' as const, every: 10, gamma: 0.5 } };
  assert.deepEqual(
    [0, 9, 10, 25].map((s) => learningRateAt(s, 1, step, 100)),
    [1, 1, 0.5, 0.25],
  );
  const cos = { warmupSteps: 10, decay: { type: 'cosine' as const, minLr: 0.1 } };
  assertClose(
    [10, 60, 110].map((s) => learningRateAt(s, 1, cos, 110)),
    [1, 0.55, 0.1],
  );
});
