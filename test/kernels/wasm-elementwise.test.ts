import { test } from 'node:test';
import assert from 'node:assert/strict';
import { assertClose, randomArray } from '../util/close.ts';
import { referenceBackend as ref } from './reference.ts';
import { jsBackend } from '../../src/kernels/js/index.ts';
import { wasmBackend, Placer, PLACEMENTS, assertCloseNaN } from './wasmHelpers.ts';
import type { ActivationKind } from '../../src/kernels/activation.ts';
import type { AdamParams, SgdParams } from '../../src/kernels/optimizerKernels.ts';

const b = await wasmBackend();
const KINDS: ActivationKind[] = ['relu', 'clippedRelu', 'tanh', 'sigmoid', 'linear'];
const LENGTHS = [1, 3, 4, 7, 33, 65, 129, 1000];

test('wasm biasAdd and biasGrad match the reference (odd rows/cols, y = x, accumulation)', () => {
  let seed = 1;
  for (const [rows, cols] of [
    [1, 1],
    [7, 3],
    [33, 65],
    [129, 4],
    [5, 129],
    [43264 / 64, 32],
  ] as const) {
    const x = randomArray(rows * cols, seed++),
      bias = randomArray(cols, seed++),
      db0 = randomArray(cols, seed++);
    const want = new Float32Array(rows * cols),
      wdb = db0.slice();
    ref.biasAdd(x, bias, want, rows, cols);
    ref.biasGrad(x, wdb, rows, cols);
    for (const where of PLACEMENTS) {
      const p = new Placer(b, where);
      const y = p.f32(new Float32Array(rows * cols));
      b.biasAdd(p.f32(x), p.f32(bias), y, rows, cols);
      assertClose(y, want, { what: `biasAdd ${rows}×${cols} ${where}` });
      const inplace = p.f32(x);
      b.biasAdd(inplace, p.f32(bias), inplace, rows, cols);
      assertClose(inplace, want, { what: `biasAdd in place ${rows}×${cols} ${where}` });
      const db = p.f32(db0);
      b.biasGrad(p.f32(x), db, rows, cols);
      assertClose(db, wdb, { rtol: 1e-6, atol: 1e-6, what: `biasGrad ${rows}×${cols} ${where}` });
    }
  }
});

test('wasm activations forward/backward match the reference (NaN propagates, caps, in place)', () => {
  let seed = 100;
  for (const kind of KINDS)
    for (const n of LENGTHS)
      for (const cap of [undefined, 0.5]) {
        const x = randomArray(n, seed++).map((v) => v * 3);
        if (n > 5) x[5] = NaN;
        const wy = new Float32Array(n);
        ref.activationForward(kind, x, wy, cap);
        const dy = randomArray(n, seed++);
        const wdx = new Float32Array(n);
        ref.activationBackward(kind, wy, dy, wdx, cap);
        for (const where of PLACEMENTS) {
          const p = new Placer(b, where);
          const y = p.f32(new Float32Array(n));
          b.activationForward(kind, p.f32(x), y, cap);
          assertCloseNaN(y, wy, { rtol: 1e-6, atol: 1e-7, what: `${kind} forward n=${n} cap=${cap} ${where}` });
          const inplace = p.f32(x);
          b.activationForward(kind, inplace, inplace, cap);
          assertCloseNaN(inplace, wy, { rtol: 1e-6, atol: 1e-7, what: `${kind} forward in place n=${n} ${where}` });
          const dx = p.f32(new Float32Array(n));
          b.activationBackward(kind, p.f32(wy), p.f32(dy), dx, cap);
          assertCloseNaN(dx, wdx, { rtol: 1e-6, atol: 1e-7, what: `${kind} backward n=${n} cap=${cap} ${where}` });
          const alias = p.f32(dy);
          b.activationBackward(kind, p.f32(wy), alias, alias, cap);
          assertCloseNaN(alias, wdx, { rtol: 1e-6, atol: 1e-7, what: `${kind} backward dx = dy n=${n} ${where}` });
        }
      }
});

test('wasm softmaxCrossEntropy matches the reference (sum of losses, scaled dlogits, in place) and checks labels', () => {
  let seed = 300;
  for (const [rows, classes] of [
    [1, 1],
    [1, 10],
    [64, 10],
    [7, 33],
    [3, 1000],
  ] as const) {
    const logits = randomArray(rows * classes, seed++).map((v) => v * 8);
    const labels = Int32Array.from({ length: rows }, (_, r) => (r * 7 + 3) % classes);
    const wd = new Float32Array(rows * classes);
    const wantLoss = ref.softmaxCrossEntropy(logits, labels, rows, classes, wd, 1 / rows);
    for (const where of PLACEMENTS) {
      const p = new Placer(b, where);
      const d = p.f32(new Float32Array(rows * classes));
      const loss = b.softmaxCrossEntropy(p.f32(logits), p.i32(labels), rows, classes, d, 1 / rows);
      assertClose([loss], [wantLoss], { rtol: 1e-9, atol: 1e-9, what: `loss ${rows}×${classes} ${where}` });
      assertClose(d, wd, { rtol: 1e-6, atol: 1e-8, what: `dlogits ${rows}×${classes} ${where}` });
      const inplace = p.f32(logits);
      b.softmaxCrossEntropy(inplace, p.i32(labels), rows, classes, inplace, 1 / rows);
      assertClose(inplace, wd, { rtol: 1e-6, atol: 1e-8, what: `dlogits in place ${rows}×${classes} ${where}` });
    }
  }
  const logits = b.alloc(20);
  assert.throws(() => b.softmaxCrossEntropy(logits, Int32Array.from([0, 10]), 2, 10, logits, 1), /row 1 has label 10/);
});

test('wasm axpy and scale match plain loops', () => {
  let seed = 500;
  for (const n of LENGTHS)
    for (const where of PLACEMENTS) {
      const p = new Placer(b, where);
      const x = randomArray(n, seed++),
        y0 = randomArray(n, seed++);
      const y = p.f32(y0);
      b.axpy(-0.75, p.f32(x), y);
      assertClose(
        y,
        y0.map((v, i) => v + -0.75 * x[i]!),
        { what: `axpy n=${n} ${where}` },
      );
      b.scale(1.5, y);
      assertClose(
        y,
        y0.map((v, i) => (v + -0.75 * x[i]!) * 1.5),
        { what: `scale n=${n} ${where}` },
      );
    }
});

test('wasm adamStep (Adam, AdamW) and sgdStep (plain, momentum, Nesterov) match the js backend over several steps', () => {
  let seed = 700;
  for (const n of [1, 5, 33, 1031]) {
    for (const [decoupled, wd] of [
      [false, 0],
      [false, 0.01],
      [true, 0.05],
    ] as const) {
      const w0 = randomArray(n, seed++);
      const pj = w0.slice(),
        mj = new Float32Array(n),
        vj = new Float32Array(n);
      const pl = new Placer(b, n % 2 ? 'mixed' : 'wasm');
      const pw = pl.f32(w0),
        mw = pl.f32(new Float32Array(n)),
        vw = pl.f32(new Float32Array(n));
      for (let step = 1; step <= 4; step++) {
        const g = randomArray(n, seed++);
        const hp: AdamParams = { lr: 0.01, beta1: 0.9, beta2: 0.999, eps: 1e-8, weightDecay: wd, decoupled, step };
        jsBackend.adamStep(pj, g, mj, vj, hp);
        b.adamStep(pw, pl.f32(g), mw, vw, hp);
      }
      assertClose(mw, mj, { rtol: 1e-5, atol: 1e-7, what: `adam m n=${n} decoupled=${decoupled}` });
      assertClose(vw, vj, { rtol: 1e-5, atol: 1e-9, what: `adam v n=${n} decoupled=${decoupled}` });
      assertClose(pw, pj, { rtol: 1e-5, atol: 1e-6, what: `adam params n=${n} decoupled=${decoupled}` });
    }
    for (const [momentum, nesterov] of [
      [0, false],
      [0.9, false],
      [0.9, true],
    ] as const) {
      const w0 = randomArray(n, seed++);
      const pj = w0.slice(),
        velj = new Float32Array(n);
      const pl = new Placer(b, n % 2 ? 'js' : 'wasm');
      const pw = pl.f32(w0),
        velw = pl.f32(new Float32Array(n));
      for (let step = 1; step <= 4; step++) {
        const g = randomArray(n, seed++);
        const hp: SgdParams = { lr: 0.1, momentum, nesterov, weightDecay: 1e-3 };
        jsBackend.sgdStep(pj, g, momentum ? velj : null, hp);
        b.sgdStep(pw, pl.f32(g), momentum ? velw : null, hp);
      }
      assertClose(pw, pj, { rtol: 1e-5, atol: 1e-6, what: `sgd n=${n} momentum=${momentum} nesterov=${nesterov}` });
      if (momentum) assertClose(velw, velj, { rtol: 1e-5, atol: 1e-6, what: `sgd velocity n=${n}` });
    }
  }
});
