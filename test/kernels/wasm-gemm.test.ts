import { test } from 'node:test';
import assert from 'node:assert/strict';
import { assertClose, randomArray } from '../util/close.ts';
import { referenceBackend as ref } from './reference.ts';
import { wasmBackend, Placer, PLACEMENTS, type Placement } from './wasmHelpers.ts';

const b = await wasmBackend();
const LAYOUTS = [
  [false, false],
  [true, false],
  [false, true],
  [true, true],
] as const;

// Sums of K products of values in [-1, 1): absolute error grows like sqrt(K)·eps (FMA or not).
const tol = (K: number, alpha: number) => ({
  rtol: 1e-5,
  atol: 2e-6 * (1 + Math.sqrt(K)) * Math.max(1, Math.abs(alpha)),
});

function check(
  where: Placement,
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
  const want = C0.slice();
  ref.gemm(transA, transB, M, N, K, alpha, A, B, beta, want);
  const p = new Placer(b, where);
  const got = p.f32(C0);
  b.gemm(transA, transB, M, N, K, alpha, p.f32(A), p.f32(B), beta, got);
  assertClose(got, want, {
    ...tol(K, alpha),
    what: `wasm gemm[${where}](${transA}, ${transB}, M=${M}, N=${N}, K=${K}, alpha=${alpha}, beta=${beta})`,
  });
}

test(`wasm gemm runs the ${b.relaxed ? 'relaxed-SIMD (FMA)' : 'SIMD128'} build`, () => {
  assert.equal(b.name, 'wasm');
});

test('wasm gemm matches the reference on odd shapes, every transpose, alpha and beta', () => {
  const sizes = [1, 2, 3, 4, 5, 7, 8, 9, 33, 65];
  let seed = 1;
  for (const [ta, tb] of LAYOUTS) {
    for (const M of sizes)
      for (const N of [1, 7, 8, 33, 65])
        for (const K of [1, 3, 4, 33]) {
          check('wasm', ta, tb, M, N, K, 1, 0, seed++);
        }
    for (const where of PLACEMENTS) {
      check(where, ta, tb, 7, 9, 5, -1.5, 0.75, seed++);
      check(where, ta, tb, 33, 17, 65, 0.5, 1, seed++);
      check(where, ta, tb, 65, 5, 7, 2, -2, seed++);
    }
  }
});

test('wasm gemm crosses every block boundary (M > 128, K > 384, N > 1024) and the skinny training shapes', () => {
  let seed = 1000;
  for (const [ta, tb] of LAYOUTS) {
    check('wasm', ta, tb, 129, 33, 520, 0.75, 0.5, seed++);
    check('wasm', ta, tb, 7, 1031, 65, 1, 1, seed++);
  }
  check('wasm', false, false, 64, 128, 1600, 1, 0, seed++);
  check('js', false, true, 64, 1600, 128, 1, 0, seed++);
  check('mixed', true, false, 1600, 128, 64, 1, 1, seed++);
  check('wasm', false, false, 257, 129, 769, 1, 0, seed++);
});

test('wasm gemm: beta = 0 overwrites NaN; K = 0 and alpha = 0 only scale C', () => {
  for (const where of PLACEMENTS) {
    const p = new Placer(b, where);
    const A = randomArray(6 * 5, 7),
      B = randomArray(5 * 9, 8);
    const C = p.f32(new Float32Array(6 * 9).fill(NaN));
    b.gemm(false, false, 6, 9, 5, 1, p.f32(A), p.f32(B), 0, C);
    const want = new Float32Array(6 * 9);
    ref.gemm(false, false, 6, 9, 5, 1, A, B, 0, want);
    assertClose(C, want, { rtol: 1e-5, atol: 1e-5 });

    const C2 = p.f32([1, 2, 3, 4]);
    b.gemm(false, false, 2, 2, 0, 1, new Float32Array(0), new Float32Array(0), 3, C2);
    assert.deepEqual([...C2], [3, 6, 9, 12]);
    b.gemm(false, false, 2, 2, 1, 0, p.f32([NaN, NaN]), p.f32([1, 1]), 1, C2);
    assert.deepEqual([...C2], [3, 6, 9, 12]);
  }
});

test('wasm gemm writes only the first M·N values of a longer C view, inside and outside wasm memory', () => {
  const A = randomArray(3 * 4, 3),
    B = randomArray(4 * 5, 4);
  const want = new Float32Array(15);
  ref.gemm(false, false, 3, 5, 4, 1, A, B, 0, want);
  for (const buf of [
    new Float32Array(40).fill(7),
    (() => {
      const a = b.alloc(40);
      a.fill(7);
      return a;
    })(),
  ]) {
    const C = buf.subarray(5, 5 + 15);
    b.gemm(false, false, 3, 5, 4, 1, A, B, 0, C);
    assertClose(C, want, { rtol: 1e-5, atol: 1e-5 });
    assert.ok(buf.subarray(0, 5).every((v) => v === 7) && buf.subarray(20).every((v) => v === 7));
  }
});

test('wasm gemm rejects operands that are too short', () => {
  assert.throws(
    () => b.gemm(false, false, 4, 4, 4, 1, new Float32Array(15), new Float32Array(16), 0, new Float32Array(16)),
    /A has 15 values, needs 16/,
  );
});
