/**
 * The webgpu elementwise kernels against the js backend, on sizes across the 64-thread workgroups
 * and views at offsets of shared buffers (in place where the contract allows it). Tolerances:
 * - bitwise: biasAdd, copyRows, and relu, clippedRelu (a ceiling that is not a float32 too),
 *   leakyRelu and linear, forward and backward — the same float32 operations;
 * - tanh, sigmoid, gelu: 4e-6·|want| + 1e-30 (float32 against float64 with one rounding; a few ulp
 *   of exp), for gelu plus 1.2e-7·x²·|want| (the roundings of exp's argument −x²/2) and, backward,
 *   relative to |dy|·(Φ + |x|φ), the terms its derivative cancels; NaN and ±Inf as js gives them;
 * - axpy and scale: 2 ulp of |y| + |alpha·x| (alpha is rounded to float32, the CPU keeps float64);
 * - biasGrad: 1e-5 of Σ|dy| per column (float32 sums);
 */
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import type { ActivationKind } from '../../src/kernels/activation.ts';
import { backwardReadsInput } from '../../src/kernels/activation.ts';
import { normalCdf } from '../../src/kernels/js/elementwise.ts';
import { jsBackend } from '../../src/kernels/js/index.ts';
import { activationBackward, activationForward } from '../../src/kernels/webgpu/activations.ts';
import { axpy, biasAdd, biasGrad, copyRows, scale } from '../../src/kernels/webgpu/elementwise.ts';
import { gpuView } from '../../src/kernels/webgpu/gpuArray.ts';
import { assertBitwise, assertClose, random, ulp } from './compareArrays.ts';
import { gpuOrSkip, releaseGpu } from './gpuTest.ts';

after(releaseGpu);

const SPECIALS = [
  0,
  -0,
  1e-3,
  -1e-3,
  1e-6,
  -1e-6,
  0.6249,
  0.625,
  -0.7,
  3,
  -3,
  9.99,
  10,
  10.5,
  -10.5,
  20,
  -20,
  25,
  -25,
  50,
  -50,
  1e30,
  -1e30,
  Infinity,
  -Infinity,
  Number.NaN,
  Math.fround(6.1),
  6.1000004,
  6.0999994,
];

function activationInput(n: number, seed: number): Float32Array {
  const x = random(n, seed, -14, 14);
  x.set(SPECIALS.slice(0, Math.min(n, SPECIALS.length)));
  return x;
}

const EXACT = new Set<ActivationKind>(['relu', 'clippedRelu', 'leakyRelu', 'linear']);
const KINDS: [ActivationKind, number | undefined][] = [
  ['relu', undefined],
  ['clippedRelu', undefined],
  ['clippedRelu', 6.1],
  ['tanh', undefined],
  ['sigmoid', undefined],
  ['linear', undefined],
  ['gelu', undefined],
  ['leakyRelu', undefined],
  ['leakyRelu', 0.2],
];

/**
 * Bitwise for the piecewise kinds; else within 4e-6 of `size(i)` (|want|, or for gelu's backward
 * the sum of the magnitudes its two terms cancel from), for gelu plus 1.2e-7·x² of it: the float32
 * roundings of exp's argument −x²/2 (its own, and its scaling by log2 e) are relative errors of exp.
 */
function check(
  kind: ActivationKind,
  x: Float32Array,
  got: Float32Array,
  want: Float32Array,
  what: string,
  size?: (i: number) => number,
): void {
  if (EXACT.has(kind)) {
    assertBitwise(got, want, what);
    return;
  }
  const argument = kind === 'gelu' ? 1.2e-7 : 0;
  assertClose(got, want, (w, i) => (4e-6 + argument * x[i]! * x[i]!) * (size ? size(i) : Math.abs(w)) + 1e-30, what);
}

/** |dy|·(Φ(x) + |x|·φ(x)): the terms of gelu's derivative before they cancel. */
function geluBackwardSize(x: Float32Array, dy: Float32Array): (i: number) => number {
  return (i) => {
    const v = x[i]!;
    return Math.abs(dy[i]!) * (normalCdf(v) + Math.abs(v) * Math.exp(-0.5 * v * v) * 0.3989422804014327);
  };
}

test('activationForward/Backward: every kind equals the js backend, specials included', async (t) => {
  const gpu = await gpuOrSkip(t);
  if (!gpu) return;
  for (const n of [1, 63, 1000]) {
    const x = activationInput(n, n),
      dy = random(n, n + 1, -2, 2);
    for (const [kind, cap] of KINDS) {
      const what = `${kind}(${cap ?? 'default'}) n=${n}`;
      const y = new Float32Array(n);
      jsBackend.activationForward(kind, x, y, cap);
      const saved = backwardReadsInput(kind) ? x : y;
      const dx = new Float32Array(n);
      jsBackend.activationBackward(kind, saved, dy, dx, cap);
      // x and y as views of one buffer, then in place; the backward from views of another
      const flat = gpu.upload(new Float32Array([...random(3, 1), ...x, ...random(n + 2, 2)]));
      const gx = gpuView(flat, 3, n),
        gy = gpuView(flat, 3 + n + 2, n);
      activationForward(gpu, kind, gx, gy, cap);
      const [gotY] = await gpu.read(gy);
      check(kind, x, gotY!, y, `${what} forward`);
      activationForward(gpu, kind, gx, gx, cap);
      const [inPlace] = await gpu.read(gx);
      check(kind, x, inPlace!, y, `${what} forward in place`);
      const back = gpu.upload(new Float32Array([...saved, ...random(5, 3), ...dy, ...random(n, 4)]));
      const gSaved = gpuView(back, 0, n),
        gdy = gpuView(back, n + 5, n),
        gdx = gpuView(back, 2 * n + 5, n);
      activationBackward(gpu, kind, gSaved, gdy, gdx, cap);
      const [gotDx] = await gpu.read(gdx);
      const size = kind === 'gelu' ? geluBackwardSize(x, dy) : undefined;
      check(kind, x, gotDx!, dx, `${what} backward`, size);
      activationBackward(gpu, kind, gSaved, gdy, gdy, cap);
      const [dxInPlace] = await gpu.read(gdy);
      check(kind, x, dxInPlace!, dx, `${what} backward in place`, size);
    }
  }
});

test('activationForward: an unknown kind and a short output are refused', async (t) => {
  const gpu = await gpuOrSkip(t);
  if (!gpu) return;
  const a = gpu.array(4);
  assert.throws(() => activationForward(gpu, 'swish' as ActivationKind, a, a), /unknown activation 'swish'/);
  assert.throws(() => activationForward(gpu, 'relu', a, gpuView(a, 0, 3)), /output has 3 values, input 4/);
  assert.throws(() => activationBackward(gpu, 'relu', a, a, gpuView(a, 0, 2)), /dx 2/);
});

test('biasAdd (bitwise, in place too) and biasGrad (accumulated) equal the js backend', async (t) => {
  const gpu = await gpuOrSkip(t);
  if (!gpu) return;
  for (const [rows, cols] of [
    [1, 1],
    [7, 65],
    [300, 3],
    [2500, 17],
    [1, 200],
  ] as const) {
    const n = rows * cols;
    const x = random(n, n, -3, 3),
      bias = random(cols, cols);
    const y = new Float32Array(n);
    jsBackend.biasAdd(x, bias, y, rows, cols);
    const flat = gpu.upload(new Float32Array([...random(1, 9), ...bias, ...x]));
    const gb = gpuView(flat, 1, cols),
      gx = gpuView(flat, 1 + cols, n),
      gy = gpuView(gpu.array(n + 4), 4, n);
    biasAdd(gpu, gx, gb, gy, rows, cols);
    biasAdd(gpu, gx, gb, gx, rows, cols);
    const [gotY, inPlace] = await gpu.read(gy, gx);
    assertBitwise(gotY!, y, `biasAdd ${rows}×${cols}`);
    assertBitwise(inPlace!, y, `biasAdd ${rows}×${cols} in place`);

    const db = random(cols, 77),
      want = db.slice();
    jsBackend.biasGrad(x, want, rows, cols);
    const absSum = new Float64Array(cols);
    for (let i = 0; i < n; i++) absSum[i % cols] += Math.abs(x[i]!);
    const gdb = gpuView(gpu.upload(new Float32Array([0, 0, ...db])), 2, cols);
    // gx now holds y: dy from a fresh view at an offset
    biasGrad(gpu, gpuView(gpu.upload(new Float32Array([7, ...x])), 1, n), gdb, rows, cols);
    const [gotDb] = await gpu.read(gdb);
    assertClose(gotDb!, want, (_, c) => 1e-5 * (absSum[c]! + Math.abs(db[c]!)) + 1e-30, `biasGrad ${rows}×${cols}`);
  }
});

test('copyRows: gathers, zero rows, accumulation, views of one buffer; bad rows refused', async (t) => {
  const gpu = await gpuOrSkip(t);
  if (!gpu) return;
  const width = 70,
    fromRows = 9,
    toRows = 12;
  const from = random(fromRows * width, 1),
    to = random(toRows * width, 2);
  const fromStarts = Int32Array.from([3, -1, 0, 8, 5, -1, 2].map((r) => (r < 0 ? -1 : r * width)));
  const toStarts = Int32Array.from([11, 0, 4, 7, 1, 9, 3].map((r) => r * width));
  for (const add of [false, true]) {
    const want = to.slice();
    jsBackend.copyRows(from, fromStarts, want, toStarts, 7, width, add);
    // from and to as views of one buffer
    const flat = gpu.upload(new Float32Array([...random(5, 3), ...from, ...to]));
    const gFrom = gpuView(flat, 5, from.length),
      gTo = gpuView(flat, 5 + from.length, to.length);
    copyRows(gpu, gFrom, fromStarts, gTo, toStarts, 7, width, add);
    const [got] = await gpu.read(gTo);
    assertBitwise(got!, want, `copyRows add=${add}`);
  }
  const a = gpu.array(100);
  assert.throws(
    () => copyRows(gpu, a, Int32Array.of(95), a, Int32Array.of(0), 1, 10, false),
    /row 0 reads from\[95 … 105\)/,
  );
  assert.throws(() => copyRows(gpu, a, Int32Array.of(0), a, Int32Array.of(-2), 1, 10, false), /row 0 writes to\[-2/);
  assert.throws(
    () => copyRows(gpu, a, Int32Array.of(0, 10), a, Int32Array.of(50, 55), 2, 10, true),
    /destination rows at 50 and 55 overlap/,
  );
});

test('axpy and scale equal the js backend within 2 ulp', async (t) => {
  const gpu = await gpuOrSkip(t);
  if (!gpu) return;
  for (const n of [1, 65, 3000]) {
    const x = random(n, n, -4, 4),
      y = random(n, n + 1, -4, 4);
    const alpha = -0.3;
    const wantY = y.slice();
    jsBackend.axpy(alpha, x, wantY);
    const wantX = x.slice();
    jsBackend.scale(alpha, wantX);
    const gx = gpu.upload(x),
      gy = gpu.upload(y);
    axpy(gpu, alpha, gx, gy);
    scale(gpu, alpha, gx);
    const [gotY, gotX] = await gpu.read(gy, gx);
    assertClose(gotY!, wantY, (_, i) => 2 * ulp(Math.abs(y[i]!) + Math.abs(alpha * x[i]!)), `axpy n=${n}`);
    assertClose(gotX!, wantX, (w) => 2 * ulp(w), `scale n=${n}`);
  }
});

test('scale: every element of an array wider than 65535 workgroups of 64 (the grid spreads over y)', async (t) => {
  const gpu = await gpuOrSkip(t);
  if (!gpu) return;
  const n = 65535 * 64 + 100;
  const x = Float32Array.from({ length: n }, (_, i) => i % 4093);
  const gx = gpu.upload(x);
  scale(gpu, 0.5, gx);
  const [got] = await gpu.read(gx);
  jsBackend.scale(0.5, x);
  assertBitwise(got!, x, 'scale by 0.5');
});
