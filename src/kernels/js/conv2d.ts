import type { Conv2DGeometry } from '../convKernels.ts';
import { gemm } from './gemm.ts';
import { im2col, col2im } from './im2col.ts';
import { biasAdd, biasGrad } from './elementwise.ts';

/**
 * Convolutions as im2col + GEMM over chunks of output pixels, so the scratch stays bounded
 * whatever the batch size: x[N,H,W,C] (NHWC), w[KH,KW,C,F] seen as a [KH·KW·C, F] matrix,
 * y[N,OH,OW,F] seen as a [N·OH·OW, F] matrix.
 */

/** Default im2col scratch budget in floats (4 MB). The trailing `budget` parameters exist for tests. */
export const IM2COL_BUDGET = 1 << 20;

let colScratch = new Float32Array(0);

function scratch(length: number): Float32Array {
  if (colScratch.length < length) colScratch = new Float32Array(length);
  return colScratch;
}

/** Output pixels per chunk: as many im2col rows as fit the budget, at least one. */
function chunkRows(P: number, rowLen: number, budget: number): number {
  return Math.max(1, Math.min(P, Math.floor(budget / Math.max(1, rowLen))));
}

/** A 1×1, stride-1, unpadded convolution is already a GEMM on x itself. */
function isPointwise(g: Conv2DGeometry): boolean {
  return (
    g.KH === 1 &&
    g.KW === 1 &&
    g.strideH === 1 &&
    g.strideW === 1 &&
    g.padTop === 0 &&
    g.padLeft === 0 &&
    g.OH === g.H &&
    g.OW === g.W
  );
}

/** y[N,OH,OW,F] = conv(x, w) (+ bias). */
export function conv2dForward(
  x: Float32Array,
  w: Float32Array,
  bias: Float32Array | null,
  y: Float32Array,
  g: Conv2DGeometry,
  budget = IM2COL_BUDGET,
): void {
  const { N, C, KH, KW, F, OH, OW } = g;
  const P = N * OH * OW;
  if (P === 0 || F === 0) return;
  const rowLen = KH * KW * C;
  if (isPointwise(g)) {
    gemm(false, false, P, F, C, 1, x, w, 0, y);
  } else {
    const rows = chunkRows(P, rowLen, budget);
    const col = scratch(rows * rowLen);
    for (let p0 = 0; p0 < P; p0 += rows) {
      const p1 = Math.min(P, p0 + rows);
      im2col(x, g, p0, p1, col);
      gemm(false, false, p1 - p0, F, rowLen, 1, col, w, 0, y.subarray(p0 * F, p1 * F));
    }
  }
  if (bias) biasAdd(y, bias, y, P, F);
}

/** dx[N,H,W,C] (overwritten) = convolution transposed applied to dy. */
export function conv2dBackwardData(
  dy: Float32Array,
  w: Float32Array,
  dx: Float32Array,
  g: Conv2DGeometry,
  budget = IM2COL_BUDGET,
): void {
  const { N, H, W, C, KH, KW, F, OH, OW } = g;
  const P = N * OH * OW;
  if (isPointwise(g)) {
    gemm(false, true, P, C, F, 1, dy, w, 0, dx);
    return;
  }
  // Pixels no window touches (stride > kernel, trailing rows) must still read 0.
  dx.fill(0, 0, N * H * W * C);
  if (P === 0) return;
  const rowLen = KH * KW * C;
  const rows = chunkRows(P, rowLen, budget);
  const col = scratch(rows * rowLen);
  for (let p0 = 0; p0 < P; p0 += rows) {
    const p1 = Math.min(P, p0 + rows);
    gemm(false, true, p1 - p0, rowLen, F, 1, dy.subarray(p0 * F, p1 * F), w, 0, col);
    col2im(col, g, p0, p1, dx);
  }
}

/** dw[KH,KW,C,F] += im2col(x)ᵀ · dy; db[F] += Σ dy when given. */
export function conv2dBackwardFilter(
  x: Float32Array,
  dy: Float32Array,
  dw: Float32Array,
  db: Float32Array | null,
  g: Conv2DGeometry,
  budget = IM2COL_BUDGET,
): void {
  const { N, C, KH, KW, F, OH, OW } = g;
  const P = N * OH * OW;
  if (P === 0) return;
  const rowLen = KH * KW * C;
  if (isPointwise(g)) {
    gemm(true, false, C, F, P, 1, x, dy, 1, dw);
  } else {
    const rows = chunkRows(P, rowLen, budget);
    const col = scratch(rows * rowLen);
    for (let p0 = 0; p0 < P; p0 += rows) {
      const p1 = Math.min(P, p0 + rows);
      im2col(x, g, p0, p1, col);
      gemm(true, false, rowLen, F, p1 - p0, 1, col, dy.subarray(p0 * F, p1 * F), 1, dw);
    }
  }
  if (db) biasGrad(dy, db, P, F);
}
