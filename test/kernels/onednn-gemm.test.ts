// The onednn backend's gemm (oneDNN's matmul primitive through the N-API addon, and its dnnl_sgemm
// entry point) against the reference: every transpose, alpha/beta, odd sizes, and operands that are
// views at non-zero offsets into a SharedArrayBuffer, into the wasm backend's shared memory, or
// plain arrays. Skipped when the addon is not built (it is optional: `apt-get install libdnnl-dev &&
// npm run build:onednn`).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { assertClose, randomArray } from '../util/close.ts';
import { referenceBackend as ref } from './reference.ts';
import { createOneDnnBackend, onednnUnavailableReason, type OneDnnBackend } from '../../src/kernels/onednn/index.ts';
import type { WasmBackend } from '../../src/kernels/wasm/index.ts';

const onednn = await createOneDnnBackend();
const skip = onednn ? false : `onednn backend unavailable: ${onednnUnavailableReason()}`;
const b = onednn as OneDnnBackend & WasmBackend;
const LAYOUTS = [[false, false], [true, false], [false, true], [true, true]] as const;
const MODES = ['matmul', 'sgemm'] as const;

type Placement = 'wasm' | 'wasm+3' | 'sab+5' | 'js';
const PLACEMENTS: readonly Placement[] = ['wasm', 'wasm+3', 'sab+5', 'js'];

function place(where: Placement, a: ArrayLike<number>): Float32Array {
  let out: Float32Array;
  if (where === 'wasm') out = b.alloc(a.length);
  else if (where === 'wasm+3') out = b.alloc(a.length + 7).subarray(3, 3 + a.length);
  else if (where === 'sab+5') out = new Float32Array(new SharedArrayBuffer((a.length + 9) * 4), 5 * 4, a.length);
  else out = new Float32Array(a.length);
  out.set(a);
  return out;
}

// Sums of K products of values in [-1, 1): absolute error grows like sqrt(K)·eps.
const tol = (K: number, alpha: number) => ({ rtol: 1e-5, atol: 2e-6 * (1 + Math.sqrt(K)) * Math.max(1, Math.abs(alpha)) });

function check(where: Placement, transA: boolean, transB: boolean, M: number, N: number, K: number,
               alpha: number, beta: number, seed: number): void {
  const A = randomArray(M * K, seed), B = randomArray(K * N, seed + 1), C0 = randomArray(M * N, seed + 2);
  const want = C0.slice();
  ref.gemm(transA, transB, M, N, K, alpha, A, B, beta, want);
  const got = place(where, C0);
  b.gemm(transA, transB, M, N, K, alpha, place(where, A), place(where, B), beta, got);
  assertClose(got, want, { ...tol(K, alpha), what: `onednn gemm[${where}](${transA}, ${transB}, M=${M}, N=${N}, K=${K}, alpha=${alpha}, beta=${beta})` });
}

/** Runs `fn` with gemm through `mode`, then back to the default. */
function withMode(mode: 'matmul' | 'sgemm', fn: () => void): void {
  b.setGemm(mode);
  try { fn(); } finally { b.setGemm('matmul'); }
}

test('onednn gemm matches the reference on odd sizes (1, 7, 33, 65, 129) for every transpose', { skip }, () => {
  const sizes = [1, 7, 33, 129];
  let seed = 1;
  for (const [ta, tb] of LAYOUTS) {
    for (const M of sizes) for (const N of sizes) for (const K of sizes) check('wasm', ta, tb, M, N, K, 1, 0, seed++);
  }
  for (const mode of MODES) withMode(mode, () => {
    for (const [ta, tb] of LAYOUTS) check('wasm', ta, tb, 65, 33, 7, 1, 0, seed++);
  });
  assert.equal(b.stats().matmul.unsupported, 0, 'every shape ran as a oneDNN matmul');
});

test('onednn gemm: alpha and beta, with operands in wasm memory, SharedArrayBuffer views at offsets and plain arrays', { skip }, () => {
  let seed = 5000;
  for (const mode of MODES) withMode(mode, () => {
    for (const [ta, tb] of LAYOUTS) for (const where of PLACEMENTS) {
      for (const [alpha, beta] of [[-1.5, 0.75], [0.5, 1], [2, -2], [1, 0]] as const) {
        check(where, ta, tb, 7, 33, 65, alpha, beta, seed++);
        check(where, ta, tb, 129, 1, 7, alpha, beta, seed++);
      }
    }
  });
});

test('onednn gemm at the training shapes (dense layer of mnist-small, batch 64)', { skip }, () => {
  let seed = 9000;
  check('wasm', false, false, 64, 128, 1600, 1, 0, seed++);
  check('sab+5', false, true, 64, 1600, 128, 1, 0, seed++);
  check('wasm+3', true, false, 1600, 128, 64, 1, 1, seed++);
  withMode('sgemm', () => check('js', false, false, 257, 129, 769, 1, 0, seed++));
});

test('onednn gemm: beta = 0 overwrites NaN; K = 0 and alpha = 0 only scale C', { skip }, () => {
  for (const mode of MODES) withMode(mode, () => {
    for (const where of PLACEMENTS) {
      const A = randomArray(6 * 5, 7), B = randomArray(5 * 9, 8);
      const C = place(where, new Float32Array(6 * 9).fill(NaN));
      b.gemm(false, false, 6, 9, 5, 1, place(where, A), place(where, B), 0, C);
      const want = new Float32Array(6 * 9);
      ref.gemm(false, false, 6, 9, 5, 1, A, B, 0, want);
      assertClose(C, want, { rtol: 1e-5, atol: 1e-5, what: `${mode} ${where} beta=0 over NaN` });

      const C2 = place(where, [1, 2, 3, 4]);
      b.gemm(false, false, 2, 2, 0, 1, new Float32Array(0), new Float32Array(0), 3, C2);
      assert.deepEqual([...C2], [3, 6, 9, 12]);
      b.gemm(false, false, 2, 2, 1, 0, place(where, [NaN, NaN]), place(where, [1, 1]), 1, C2);
      assert.deepEqual([...C2], [3, 6, 9, 12]);
      b.gemm(true, true, 2, 2, 0, 1, new Float32Array(0), new Float32Array(0), 0, C2);
      assert.deepEqual([...C2], [0, 0, 0, 0]);
      b.gemm(false, false, 0, 3, 4, 1, new Float32Array(0), place(where, new Float32Array(12)), 0, new Float32Array(0));
    }
  });
});

test('onednn gemm writes only the first M·N values of a longer C view, in every placement', { skip }, () => {
  const A = randomArray(3 * 4, 3), B = randomArray(4 * 5, 4);
  const want = new Float32Array(15);
  ref.gemm(false, false, 3, 5, 4, 1, A, B, 0, want);
  for (const where of PLACEMENTS) {
    const buf = place(where, new Float32Array(40).fill(7));
    const C = buf.subarray(5, 5 + 15);
    b.gemm(false, false, 3, 5, 4, 1, A, B, 0, C);
    assertClose(C, want, { rtol: 1e-5, atol: 1e-5, what: where });
    assert.ok(buf.subarray(0, 5).every((v) => v === 7) && buf.subarray(20).every((v) => v === 7), `${where}: wrote outside C`);
  }
});

test('onednn gemm keeps working on views made before the wasm memory grew (the cached plan takes the new pointers)', { skip }, () => {
  const A = place('wasm+3', randomArray(9 * 11, 11)), B = place('wasm', randomArray(11 * 13, 12)), C = place('wasm', new Float32Array(9 * 13));
  b.gemm(false, false, 9, 13, 11, 1, A, B, 0, C);
  const before = b.memory.buffer.byteLength;
  b.alloc(before / 4 + 1); // forces memory.grow
  assert.ok(b.memory.buffer.byteLength > before);
  C.fill(NaN);
  b.gemm(false, false, 9, 13, 11, 1, A, B, 0, C);
  const want = new Float32Array(9 * 13);
  ref.gemm(false, false, 9, 13, 11, 1, A, B, 0, want);
  assertClose(C, want, { ...tol(11, 1), what: 'after grow' });
});

test('onednn gemm rejects short operands, wrong types and bad sizes with clear errors (never touches memory)', { skip }, () => {
  const f16 = () => new Float32Array(16);
  assert.throws(() => b.gemm(false, false, 4, 4, 4, 1, new Float32Array(15), f16(), 0, f16()), /gemm: A has 15 values, needs 16/);
  assert.throws(() => b.gemm(true, true, 4, 4, 4, 1, f16(), new Float32Array(3), 0, f16()), /B has 3 values, needs 16/);
  assert.throws(() => b.gemm(false, false, 4, 4, 4, 1, f16(), f16(), 0, f16().subarray(1)), /C has 15 values, needs 16/);
  assert.throws(() => b.gemm(false, false, 4, 4, 4, 1, new Float64Array(16) as never, f16(), 0, f16()), TypeError);
  assert.throws(() => b.gemm(false, false, -1, 4, 4, 1, f16(), f16(), 0, f16()), /size M must be a non-negative integer/);
  assert.throws(() => b.gemm(false, false, 4, 2.5, 4, 1, f16(), f16(), 0, f16()), /size N must be a non-negative integer/);
  assert.throws(() => b.setGemm('blas' as never), /mode must be 'matmul' or 'sgemm'/);
});
