/**
 * The webgpu layer norm against the js kernels (src/kernels/js/layerNorm.ts: float64 per row,
 * float32 storage), with padding rows marked invalid and without flags, feature counts across the
 * 64-thread workgroup, and arrays at offsets of shared buffers. Tolerances, for rows of O(1) spread
 * around a mean of up to 10 and O(1) γ, β, dy: x̂ and y 2e-5 (float32 mean and variance of a row),
 * invStd 1e-5 relative, dx 2e-5 relative to invStd·Σ|dy·γ| / √D per row, dγ and dβ (accumulated)
 * 1e-5 of the column's Σ|terms|.
 */
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { jsBackend } from '../../src/kernels/js/index.ts';
import { gpuView } from '../../src/kernels/webgpu/gpuArray.ts';
import { layerNormBackward, layerNormForward } from '../../src/kernels/webgpu/layerNorm.ts';
import { assertClose, random } from './compareArrays.ts';
import { gpuOrSkip, releaseGpu } from './gpuTest.ts';

after(releaseGpu);

interface Forward {
  xhat: Float32Array;
  invStd: Float32Array;
  y: Float32Array;
}

/** The js kernel's forward (the definition). */
function forward(
  x: Float32Array,
  gamma: Float32Array,
  beta: Float32Array,
  valid: Int32Array | null,
  D: number,
  eps: number,
): Forward {
  const rows = x.length / D;
  const xhat = new Float32Array(x.length),
    y = new Float32Array(x.length),
    invStd = new Float32Array(rows);
  jsBackend.layerNormForward(x, gamma, beta, valid, rows, D, eps, xhat, invStd, y);
  return { xhat, invStd, y };
}

/** The js kernel's backward: dx, and dγ, dβ accumulated. */
function backward(
  dy: Float32Array,
  f: Forward,
  gamma: Float32Array,
  valid: Int32Array | null,
  D: number,
  dgamma: Float32Array,
  dbeta: Float32Array,
) {
  const rows = dy.length / D;
  const dx = new Float32Array(dy.length);
  jsBackend.layerNormBackward(dy, f.xhat, f.invStd, gamma, valid, rows, D, dx, dgamma, dbeta);
  return dx;
}

const SHAPES: [number, number][] = [
  [1, 1],
  [3, 5],
  [7, 64],
  [70, 100],
  [9, 300],
];

test('layerNormForward/Backward equal the js kernels, with and without padding rows', async (t) => {
  const gpu = await gpuOrSkip(t);
  if (!gpu) return;
  const eps = 1e-5;
  for (const [rows, D] of SHAPES) {
    for (const masked of [false, true]) {
      const n = rows * D;
      const x = random(n, n, -2, 2);
      // rows with a mean away from 0, where a one-pass variance would cancel
      for (let r = 0; r < rows; r += 2) for (let j = 0; j < D; j++) x[r * D + j]! += 10;
      const gamma = random(D, D, 0.5, 1.5),
        beta = random(D, D + 1);
      const valid = Int32Array.from({ length: rows }, (_, r) => (masked && r % 3 === 1 ? 0 : 1));
      const want = forward(x, gamma, beta, masked ? valid : null, D, eps);
      const what = `${rows}×${D}${masked ? ' masked' : ''}`;

      const params = gpu.upload(new Float32Array([0, ...gamma, ...beta]));
      const gGamma = gpuView(params, 1, D),
        gBeta = gpuView(params, 1 + D, D);
      const saved = gpu.array(2 * n + rows + 3);
      const gXhat = gpuView(saved, 1, n),
        gInv = gpuView(saved, 2 + n, rows),
        gY = gpuView(saved, 3 + n + rows, n);
      layerNormForward(
        gpu,
        gpuView(gpu.upload(new Float32Array([1, ...x])), 1, n),
        gGamma,
        gBeta,
        masked ? valid : null,
        rows,
        D,
        eps,
        gXhat,
        gInv,
        gY,
      );
      const [xhat, invStd, y] = await gpu.read(gXhat, gInv, gY);
      assertClose(xhat!, want.xhat, () => 2e-5, `${what}: xhat`);
      assertClose(invStd!, want.invStd, (w) => 1e-5 * w, `${what}: invStd`);
      assertClose(y!, want.y, () => 2e-5, `${what}: y`);

      // backward from the js forward's saved values, so that only the backward's error is measured
      const dy = random(n, n + 5);
      const dgamma = random(D, 1),
        dbeta = random(D, 2);
      const wantDgamma = dgamma.slice(),
        wantDbeta = dbeta.slice();
      const wantDx = backward(dy, want, gamma, masked ? valid : null, D, wantDgamma, wantDbeta);
      const grads = gpu.upload(new Float32Array([...dgamma, 7, ...dbeta]));
      const gDgamma = gpuView(grads, 0, D),
        gDbeta = gpuView(grads, D + 1, D);
      gpu.upload(want.xhat, gXhat);
      gpu.upload(want.invStd, gInv);
      const gDx = gpu.array(n);
      layerNormBackward(gpu, gpu.upload(dy), gXhat, gInv, gGamma, masked ? valid : null, rows, D, gDx, gDgamma, gDbeta);
      const [dx, gotDgamma, gotDbeta] = await gpu.read(gDx, gDgamma, gDbeta);
      assertClose(
        dx!,
        wantDx,
        (_, i) => {
          const r = Math.floor(i / D);
          let s = 0;
          for (let j = 0; j < D; j++) s += Math.abs(dy[r * D + j]! * gamma[j]!);
          return (2e-5 * want.invStd[r]! * s) / Math.sqrt(D) + 1e-30;
        },
        `${what}: dx`,
      );
      const columnSize = (term: (r: number) => number) => {
        let s = 0;
        for (let r = 0; r < rows; r++) if (valid[r]) s += Math.abs(term(r));
        return 1e-5 * s + 1e-6;
      };
      assertClose(
        gotDgamma!,
        wantDgamma,
        (_, j) => columnSize((r) => dy[r * D + j]! * want.xhat[r * D + j]!),
        `${what}: dgamma`,
      );
      assertClose(gotDbeta!, wantDbeta, (_, j) => columnSize((r) => dy[r * D + j]!), `${what}: dbeta`);
      if (masked)
        assert.ok(
          valid.every((v, r) => v || dx!.subarray(r * D, (r + 1) * D).every((d) => d === 0)),
          `${what}: padding rows get dx = 0`,
        );
    }
  }
});

test('layerNormForward: short arrays and flags are refused', async (t) => {
  const gpu = await gpuOrSkip(t);
  if (!gpu) return;
  const a = gpu.array(12);
  assert.throws(
    () => layerNormForward(gpu, a, a, a, null, 3, 4, 1e-5, a, gpuView(a, 0, 2), a),
    /3 rows of 4 features need invStd of 3, got 2/,
  );
  assert.throws(
    () => layerNormForward(gpu, a, a, a, Int32Array.of(1), 3, 4, 1e-5, a, a, a),
    /valid has 1 flags for 3 rows/,
  );
});
