/**
 * The webgpu gemm against the js backend's: every transpose, shapes that cross the 64×64 block and
 * the 16-deep K step (and shapes smaller than one block), alpha and beta, views at offsets,
 * beta = 0 ignoring a C full of NaN, and a batch of products at strides. Tolerance: 1e-5 relative
 * to the sum of |products| per element.
 */
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { jsBackend } from '../../src/kernels/js/index.ts';
import { gemm } from '../../src/kernels/webgpu/gemm.ts';
import { gpuView } from '../../src/kernels/webgpu/gpuArray.ts';
import { gpuOrSkip, releaseGpu } from './gpuTest.ts';

after(releaseGpu);

function random(n: number, seed: number): Float32Array {
  const a = new Float32Array(n);
  let s = seed >>> 0;
  for (let i = 0; i < n; i++) {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    a[i] = s / 2 ** 31 - 1;
  }
  return a;
}

const SHAPES: [number, number, number][] = [
  [1, 1, 1],
  [3, 5, 7],
  [64, 64, 16],
  [65, 63, 17],
  [130, 70, 33],
  [17, 129, 100],
];

test('gemm: every transpose on shapes across tile edges equals the js backend', async (t) => {
  const gpu = await gpuOrSkip(t);
  if (!gpu) return;
  for (const [M, N, K] of SHAPES)
    for (const transA of [false, true])
      for (const transB of [false, true])
        for (const [alpha, beta] of [
          [1, 0],
          [0.5, 1.5],
        ] as const) {
          const A = random(M * K, M + K),
            B = random(K * N, N * 7 + K),
            C = random(M * N, M * N);
          const want = C.slice();
          jsBackend.gemm(transA, transB, M, N, K, alpha, A, B, beta, want);
          const gC = gpu.upload(C);
          gemm(gpu, transA, transB, M, N, K, alpha, gpu.upload(A), gpu.upload(B), beta, gC);
          const [got] = await gpu.read(gC);
          const scale = (Math.abs(alpha) + Math.abs(beta)) * (K + 1);
          for (let i = 0; i < M * N; i++)
            assert.ok(
              Math.abs(got![i]! - want[i]!) <= 1e-5 * scale,
              `M=${M} N=${N} K=${K} transA=${transA} transB=${transB} alpha=${alpha} beta=${beta}: [${i}] ${got![i]} vs ${want[i]}`,
            );
        }
});

test('gemm: operands viewed at offsets of one flat buffer; beta 0 ignores NaN in C', async (t) => {
  const gpu = await gpuOrSkip(t);
  if (!gpu) return;
  const M = 33,
    N = 65,
    K = 19;
  const flat = random(7 + M * K + 5 + K * N, 3);
  const A = flat.subarray(7, 7 + M * K),
    B = flat.subarray(7 + M * K + 5);
  const want = new Float32Array(M * N);
  jsBackend.gemm(false, false, M, N, K, 1, A, B, 0, want);
  const g = gpu.upload(flat);
  const cFlat = gpu.upload(new Float32Array(11 + M * N).fill(Number.NaN));
  gemm(
    gpu,
    false,
    false,
    M,
    N,
    K,
    1,
    gpuView(g, 7, M * K),
    gpuView(g, 7 + M * K + 5, K * N),
    0,
    gpuView(cFlat, 11, M * N),
  );
  const [got] = await gpu.read(gpuView(cFlat, 11, M * N));
  for (let i = 0; i < M * N; i++)
    assert.ok(Math.abs(got![i]! - want[i]!) <= 1e-5 * (K + 1), `[${i}] ${got![i]} vs ${want[i]}`);
});

test('gemm: a batch of products at strides equals one js gemm per block', async (t) => {
  const gpu = await gpuOrSkip(t);
  if (!gpu) return;
  // (a batch past 65535 blocks, split over dispatches, takes minutes on SwiftShader: not run here)
  for (const [count, M, N, K] of [
    [3, 70, 5, 66],
    [2, 1, 1, 17],
  ] as const) {
    // A's blocks have a gap of 2 floats after each, C's of 1 (strides larger than a block)
    const aStride = M * K + 2,
      bStride = K * N,
      cStride = M * N + 1;
    const A = random(count * aStride, count + M),
      B = random(count * bStride, count + N),
      C = new Float32Array(count * cStride).fill(Number.NaN);
    const want = C.slice();
    for (let b = 0; b < count; b++)
      jsBackend.gemm(
        true,
        false,
        M,
        N,
        K,
        0.5,
        A.subarray(b * aStride, b * aStride + M * K),
        B.subarray(b * bStride, (b + 1) * bStride),
        0,
        want.subarray(b * cStride, b * cStride + M * N),
      );
    const gA = gpuView(gpu.upload(new Float32Array([0, 0, ...A])), 2, A.length);
    const gC = gpu.upload(C);
    gemm(gpu, true, false, M, N, K, 0.5, gA, gpu.upload(B), 0, gC, { count, a: aStride, b: bStride, c: cStride });
    const [got] = await gpu.read(gC);
    for (let i = 0; i < want.length; i++) {
      if (Number.isNaN(want[i]!)) assert.ok(Number.isNaN(got![i]!), `count=${count}: [${i}] between blocks written`);
      else
        assert.ok(Math.abs(got![i]! - want[i]!) <= 1e-5 * (K + 1), `count=${count}: [${i}] ${got![i]} vs ${want[i]}`);
    }
  }
});
