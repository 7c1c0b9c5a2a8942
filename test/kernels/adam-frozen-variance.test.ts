/**
 * 1-bit Adam's frozen variance (AdamParams.varianceFrozenAt, Optimizer.freezeVariance): v is not
 * updated from the gradient while m keeps moving, is bias-corrected by the step it froze at, and
 * only rises to m̂²·bc2 where the momentum outgrows it (so no element steps more than lr); the wasm
 * backend agrees with js, and the optimizer's state carries the freeze through save and restore.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { assertClose, randomArray } from '../util/close.ts';
import { jsBackend } from '../../src/kernels/js/index.ts';
import type { AdamParams } from '../../src/kernels/optimizerKernels.ts';
import { createOptimizer } from '../../src/optim/optimizer.ts';
import { parseConfig } from '../../src/config/index.ts';
import { wasmBackend, Placer } from './wasmHelpers.ts';

const b = await wasmBackend();
const base = { lr: 0.01, beta1: 0.9, beta2: 0.999, eps: 1e-8 };

test('js adamStep with varianceFrozenAt: v is max(v, m̂²·bc2), m moves, v̂ is bias-corrected by the frozen step', () => {
  const n = 37;
  for (const [decoupled, weightDecay] of [
    [false, 0.01],
    [true, 0.05],
  ] as const) {
    const p = randomArray(n, 1),
      m = new Float32Array(n),
      v = new Float32Array(n);
    for (let step = 1; step <= 3; step++)
      jsBackend.adamStep(p, randomArray(n, 10 + step), m, v, { ...base, weightDecay, decoupled, step });
    let kept = 0,
      raised = 0;
    for (let step = 4; step <= 7; step++) {
      const before = { p: p.slice(), m: m.slice(), v: v.slice() };
      // a larger gradient than the first steps' wakes some elements past their frozen variance
      const g = randomArray(n, 20 + step).map((x) => 3 * x);
      jsBackend.adamStep(p, g, m, v, { ...base, weightDecay, decoupled, step, varianceFrozenAt: 3 });
      assert.notDeepEqual(m, before.m, 'm keeps its update');
      // the step by hand: m from g as always, v = max(v, m̂²·bc2), v̂ = v / (1 − β2³)
      const bc1 = 1 - base.beta1 ** step,
        bc2 = 1 - base.beta2 ** 3;
      const want = new Float32Array(n),
        wantV = new Float32Array(n);
      for (let i = 0; i < n; i++) {
        const w = before.p[i]!;
        const gi = g[i]! + (decoupled ? 0 : weightDecay * w);
        const mi = base.beta1 * before.m[i]! + (1 - base.beta1) * gi;
        const vi = Math.max(before.v[i]!, mi * mi * (bc2 / (bc1 * bc1)));
        wantV[i] = vi;
        if (wantV[i] === before.v[i]) kept++;
        else raised++;
        const step_ = (base.lr * (mi / bc1)) / (Math.sqrt(vi / bc2) + base.eps);
        assert.ok(Math.abs(step_) <= base.lr * (1 + 1e-6), `no element steps more than lr (${step_})`);
        want[i] = w * (decoupled ? 1 - base.lr * weightDecay : 1) - step_;
      }
      assert.deepEqual(v, wantV, `v at step ${step}`);
      assert.deepEqual(p, want, `params at step ${step}`);
    }
    assert.ok(kept > 0 && raised > 0, `both cases met (${kept} kept, ${raised} raised)`);
  }
});

test('a weight whose variance froze near zero steps at most lr when its gradient wakes (unbounded, it would leap)', () => {
  const hp = { ...base, weightDecay: 0, decoupled: false };
  for (const backend of [jsBackend, b] as const) {
    // m = v = 0, as ten steps of a dead input's zero gradient leave them; v froze there
    const pb = new Float32Array(1),
      mb = new Float32Array(1),
      vb = new Float32Array(1);
    backend.adamStep(pb, Float32Array.of(5), mb, vb, { ...hp, step: 11, varianceFrozenAt: 10 });
    assert.ok(Math.abs(pb[0]!) <= base.lr * (1 + 1e-6), `stepped ${pb[0]}, lr ${base.lr}`);
    assert.ok(vb[0]! > 0, 'v rose to the momentum');
  }
});

test('adamStep refuses a varianceFrozenAt outside 1 … step, naming it', () => {
  const a = new Float32Array(4);
  for (const at of [0, 5, 1.5]) {
    const hp: AdamParams = { ...base, weightDecay: 0, decoupled: false, step: 4, varianceFrozenAt: at };
    assert.throws(() => jsBackend.adamStep(a, a, a.slice(), a.slice(), hp), /varianceFrozenAt must be a step from 1/);
    assert.throws(() => b.adamStep(a, a, a.slice(), a.slice(), hp), /varianceFrozenAt must be a step from 1/);
  }
});

test('wasm adamStep with a frozen variance matches js over several steps; v never falls', () => {
  let seed = 900;
  for (const n of [1, 5, 33, 1031]) {
    for (const decoupled of [false, true]) {
      const w0 = randomArray(n, seed++);
      const pj = w0.slice(),
        mj = new Float32Array(n),
        vj = new Float32Array(n);
      const pl = new Placer(b, n % 2 ? 'mixed' : 'wasm');
      const pw = pl.f32(w0),
        mw = pl.f32(new Float32Array(n)),
        vw = pl.f32(new Float32Array(n));
      for (let step = 1; step <= 6; step++) {
        const g = randomArray(n, seed++);
        const hp: AdamParams = { ...base, weightDecay: 0.01, decoupled, step };
        if (step > 2) hp.varianceFrozenAt = 2;
        jsBackend.adamStep(pj, g, mj, vj, hp);
        const vBefore = vw.slice();
        b.adamStep(pw, pl.f32(g), mw, vw, hp);
        if (step > 2)
          assert.ok(
            vw.every((x, i) => x >= vBefore[i]!),
            `wasm v never falls, at step ${step}`,
          );
      }
      assertClose(mw, mj, { rtol: 1e-5, atol: 1e-7, what: `m n=${n} decoupled=${decoupled}` });
      assertClose(vw, vj, { rtol: 1e-5, atol: 1e-9, what: `v n=${n} decoupled=${decoupled}` });
      assertClose(pw, pj, { rtol: 1e-5, atol: 1e-6, what: `params n=${n} decoupled=${decoupled}` });
    }
  }
});

const adamSpec = parseConfig(
  { model: { input: [4], layers: [{ dense: { units: 2 } }] }, optimizer: { adamw: { lr: 0.01 } } },
  'test',
).optimizer;

test('Optimizer.freezeVariance: freezes at the current step, is idempotent, and its state restores bit for bit', () => {
  const n = 50;
  const run = (o: ReturnType<typeof createOptimizer>, p: Float32Array, from: number, to: number) => {
    for (let s = from; s < to; s++) o.step(p, randomArray(n, 300 + s), 0.01);
  };
  const opt = createOptimizer(jsBackend, adamSpec, n);
  opt.freezeVariance!(); // before any step: nothing to freeze yet
  assert.equal(opt.state().varianceFrozenAt, undefined);
  const p = randomArray(n, 7);
  run(opt, p, 0, 3);
  opt.freezeVariance!();
  run(opt, p, 3, 4);
  opt.freezeVariance!(); // later calls keep the first step
  assert.equal(opt.state().varianceFrozenAt, 3);
  const saved = opt.state();
  const copy = { ...saved, buffers: saved.buffers.map((x) => ({ name: x.name, data: x.data.slice() })) };
  const pAt4 = p.slice();
  run(opt, p, 4, 8);
  // a fresh optimizer from the saved state continues alike, bit for bit
  const resumed = createOptimizer(jsBackend, adamSpec, n);
  resumed.loadState(copy);
  const q = pAt4.slice();
  run(resumed, q, 4, 8);
  assert.deepEqual(q, p);
  assert.deepEqual(resumed.state(), opt.state());
  // a state without the field (an older checkpoint, or saved before the freeze) is an unfrozen one
  const thawed = createOptimizer(jsBackend, adamSpec, n);
  thawed.loadState({ step: copy.step, buffers: copy.buffers });
  const r = pAt4.slice();
  run(thawed, r, 4, 8);
  assert.notDeepEqual(r, p);
  assert.equal(thawed.state().varianceFrozenAt, undefined);
  assert.equal(
    createOptimizer(jsBackend, { type: 'sgd', lr: 0.1, momentum: 0, nesterov: false, weightDecay: 0 }, n)
      .freezeVariance,
    undefined,
  );
});
