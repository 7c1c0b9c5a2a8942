import { test } from 'node:test';
import assert from 'node:assert/strict';
import { assertClose, randomArray } from '../util/close.ts';
import { referenceBackend as ref } from './reference.ts';
import { gemm } from '../../src/kernels/js/gemm.ts';

const LAYOUTS = [
  [false, false],
  [true, false],
  [false, true],
  [true, true],
] as const;

/** Runs js and reference gemm on the same random inputs and compares. */
function check(
  transA: boolean,
  transB: boolean,
  M: number,
  N: number,
  K: number,
  alpha: number,
  beta: number,
  seed: number,
): void {
  const A = randomArray(M * K, seed),
    B = randomArray(K * N, seed + 1),
    C0 = randomArray(M * N, seed + 2);
  const got = C0.slice(),
    want = C0.slice();
  gemm(transA, transB, M, N, K, alpha, A, B, beta, got);
  ref.gemm(transA, transB, M, N, K, alpha, A, B, beta, want);
  // Sums of K products of values in [-1, 1): absolute error grows like sqrt(K)·eps.
  assertClose(got, want, {
    rtol: 1e-5,
    atol: 1e-6 * (1 + Math.sqrt(K)) * Math.max(1, Math.abs(alpha)),
    what: `gemm(${transA}, ${transB}, M=${M}, N=${N}, K=${K}, alpha=${alpha}, beta=${beta})`,
  });
}

test('gemm matches the reference on odd shapes, every transpose, alpha and beta', () => {
  const sizes = [1, 2, 3, 4, 5, 7, 33, 65];
  let seed = 1;
  for (const [ta, tb] of LAYOUTS) {
    for (const M of sizes)
      for (const N of [1, 7, 33, 65])
        for (const K of [1, 3, 33]) {
          check(ta, tb, M, N, K, 1, 0, seed++);
        }
    check(ta, tb, 7, 9, 5, -1.5, 0.75, seed++);
    check(ta, tb, 33, 17, 65, 0.5, 1, seed++);
    check(ta, tb, 65, 5, 7, 2, -2, seed++);
  }
});

test('gemm crosses every cache block boundary (K > 256, N > 256, M > 64)', () => {
  let seed = 1000;
  for (const [ta, tb] of LAYOUTS) check(ta, tb, 70, 261, 300, 0.75, 0.5, seed++);
  check(false, false, 129, 513, 257, 1, 0, seed++);
});

test('gemm with beta = 0 overwrites C even when it holds NaN; K = 0 and alpha = 0 only scale C', () => {
  const A = randomArray(6 * 5, 7),
    B = randomArray(5 * 9, 8);
  const C = new Float32Array(6 * 9).fill(NaN);
  gemm(false, false, 6, 9, 5, 1, A, B, 0, C);
  const want = new Float32Array(6 * 9);
  ref.gemm(false, false, 6, 9, 5, 1, A, B, 0, want);
  assertClose(C, want);

  const C2 = Float32Array.from([1, 2, 3, 4]);
  gemm(false, false, 2, 2, 0, 1, new Float32Array(0), new Float32Array(0), 3, C2);
  assert.deepEqual([...C2], [3, 6, 9, 12]);
  gemm(false, false, 2, 2, 1, 0, Float32Array.from([NaN, NaN]), Float32Array.from([1, 1]), 1, C2);
  assert.deepEqual([...C2], [3, 6, 9, 12]);
  const C3 = Float32Array.from([NaN, NaN, NaN, NaN]);
  gemm(true, true, 2, 2, 0, 1, new Float32Array(0), new Float32Array(0), 0, C3);
  assert.deepEqual([...C3], [0, 0, 0, 0]);
});

test('gemm writes only the first M·N values of a longer C view', () => {
  const A = randomArray(3 * 4, 3),
    B = randomArray(4 * 5, 4);
  const buf = new Float32Array(40).fill(7);
  const C = buf.subarray(5, 5 + 15);
  gemm(false, false, 3, 5, 4, 1, A, B, 0, C);
  const want = new Float32Array(15);
  ref.gemm(false, false, 3, 5, 4, 1, A, B, 0, want);
  assertClose(C, want);
  assert.ok(buf.subarray(0, 5).every((v) => v === 7) && buf.subarray(20).every((v) => v === 7));
});
