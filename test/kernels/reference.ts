/**
 * Naive direct-loop reference kernels, for testing every backend (js, wasm, native, onednn) against.
 *
 * `referenceBackend` has exactly the signatures of the `Backend` methods it covers, and the same
 * conventions (overwrite y/dx, accumulate dw/db, argmax = flat index into x, padding never wins,
 * count_include_pad = false, …). Each sum runs in float64 and is rounded to float32 once, so the
 * reference is at least as accurate as anything tested against it. Speed is not a goal: keep test
 * shapes small. The reference itself is checked by hand-computed cases and finite differences in
 * test/kernels/js-reference.test.ts.
 *
 * Also exported: geometry builders, the shared conv/pool shape cases, and float64 dot products
 * for adjoint ("dot-product") tests.
 */
import type { Backend } from '../../src/kernels/backend.ts';
import type { Conv2DGeometry } from '../../src/kernels/convKernels.ts';
import type { Pool2DGeometry } from '../../src/kernels/poolKernels.ts';
import type { ActivationKind } from '../../src/kernels/activation.ts';

export type ReferenceBackend = Pick<
  Backend,
  | 'gemm'
  | 'conv2dForward'
  | 'conv2dBackwardData'
  | 'conv2dBackwardFilter'
  | 'maxPoolForward'
  | 'maxPoolBackward'
  | 'avgPoolForward'
  | 'avgPoolBackward'
  | 'biasAdd'
  | 'biasGrad'
  | 'activationForward'
  | 'activationBackward'
  | 'softmaxCrossEntropy'
>;

/** C = alpha·op(A)·op(B) + beta·C by the definition; beta = 0 ignores C (even NaN). */
function gemm(
  transA: boolean,
  transB: boolean,
  M: number,
  N: number,
  K: number,
  alpha: number,
  A: Float32Array,
  B: Float32Array,
  beta: number,
  C: Float32Array,
): void {
  for (let i = 0; i < M; i++) {
    for (let j = 0; j < N; j++) {
      let s = 0;
      for (let k = 0; k < K; k++) {
        const a = transA ? A[k * M + i] : A[i * K + k];
        const b = transB ? B[j * K + k] : B[k * N + j];
        s += a * b;
      }
      const o = i * N + j;
      C[o] = alpha * s + (beta === 0 ? 0 : beta * C[o]);
    }
  }
}

function xIndex(g: { H: number; W: number; C: number }, n: number, ih: number, iw: number, c: number): number {
  return ((n * g.H + ih) * g.W + iw) * g.C + c;
}

/** y[n,oh,ow,f] = bias[f] + Σ_{kh,kw,c} x[n, oh·sh − pt + kh, ow·sw − pl + kw, c] · w[kh,kw,c,f] (outside = 0). */
function conv2dForward(
  x: Float32Array,
  w: Float32Array,
  bias: Float32Array | null,
  y: Float32Array,
  g: Conv2DGeometry,
): void {
  const { N, H, W, C, KH, KW, F, strideH, strideW, padTop, padLeft, OH, OW } = g;
  for (let n = 0; n < N; n++)
    for (let oh = 0; oh < OH; oh++)
      for (let ow = 0; ow < OW; ow++) {
        for (let f = 0; f < F; f++) {
          let s = bias ? bias[f] : 0;
          for (let kh = 0; kh < KH; kh++) {
            const ih = oh * strideH - padTop + kh;
            if (ih < 0 || ih >= H) continue;
            for (let kw = 0; kw < KW; kw++) {
              const iw = ow * strideW - padLeft + kw;
              if (iw < 0 || iw >= W) continue;
              for (let c = 0; c < C; c++) s += x[xIndex(g, n, ih, iw, c)] * w[((kh * KW + kw) * C + c) * F + f];
            }
          }
          y[((n * OH + oh) * OW + ow) * F + f] = s;
        }
      }
}

/** dx = ∂⟨dy, conv(x)⟩/∂x, overwritten. */
function conv2dBackwardData(dy: Float32Array, w: Float32Array, dx: Float32Array, g: Conv2DGeometry): void {
  const { N, H, W, C, KH, KW, F, strideH, strideW, padTop, padLeft, OH, OW } = g;
  const acc = new Float64Array(N * H * W * C);
  for (let n = 0; n < N; n++)
    for (let oh = 0; oh < OH; oh++)
      for (let ow = 0; ow < OW; ow++) {
        for (let kh = 0; kh < KH; kh++) {
          const ih = oh * strideH - padTop + kh;
          if (ih < 0 || ih >= H) continue;
          for (let kw = 0; kw < KW; kw++) {
            const iw = ow * strideW - padLeft + kw;
            if (iw < 0 || iw >= W) continue;
            for (let c = 0; c < C; c++) {
              let s = 0;
              for (let f = 0; f < F; f++)
                s += dy[((n * OH + oh) * OW + ow) * F + f] * w[((kh * KW + kw) * C + c) * F + f];
              acc[xIndex(g, n, ih, iw, c)] += s;
            }
          }
        }
      }
  for (let i = 0; i < acc.length; i++) dx[i] = acc[i];
}

/** dw += ∂⟨dy, conv(x; w)⟩/∂w; db += Σ dy over pixels. */
function conv2dBackwardFilter(
  x: Float32Array,
  dy: Float32Array,
  dw: Float32Array,
  db: Float32Array | null,
  g: Conv2DGeometry,
): void {
  const { N, H, W, C, KH, KW, F, strideH, strideW, padTop, padLeft, OH, OW } = g;
  for (let kh = 0; kh < KH; kh++)
    for (let kw = 0; kw < KW; kw++)
      for (let c = 0; c < C; c++) {
        for (let f = 0; f < F; f++) {
          let s = 0;
          for (let n = 0; n < N; n++)
            for (let oh = 0; oh < OH; oh++) {
              const ih = oh * strideH - padTop + kh;
              if (ih < 0 || ih >= H) continue;
              for (let ow = 0; ow < OW; ow++) {
                const iw = ow * strideW - padLeft + kw;
                if (iw < 0 || iw >= W) continue;
                s += x[xIndex(g, n, ih, iw, c)] * dy[((n * OH + oh) * OW + ow) * F + f];
              }
            }
          dw[((kh * KW + kw) * C + c) * F + f] += s;
        }
      }
  if (db) {
    for (let f = 0; f < F; f++) {
      let s = 0;
      for (let p = 0; p < N * OH * OW; p++) s += dy[p * F + f];
      db[f] += s;
    }
  }
}

/** Max over in-image window cells scanned in (kh, kw) order, first of ties; an all-padding window gives 0 and argmax −1. */
function maxPoolForward(x: Float32Array, y: Float32Array, argmax: Int32Array, g: Pool2DGeometry): void {
  const { N, H, W, C, KH, KW, strideH, strideW, padTop, padLeft, OH, OW } = g;
  for (let n = 0; n < N; n++)
    for (let oh = 0; oh < OH; oh++)
      for (let ow = 0; ow < OW; ow++)
        for (let c = 0; c < C; c++) {
          let best = 0,
            at = -1;
          for (let kh = 0; kh < KH; kh++)
            for (let kw = 0; kw < KW; kw++) {
              const ih = oh * strideH - padTop + kh,
                iw = ow * strideW - padLeft + kw;
              if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
              const j = xIndex(g, n, ih, iw, c);
              if (at < 0 || x[j] > best) {
                best = x[j];
                at = j;
              }
            }
          const o = ((n * OH + oh) * OW + ow) * C + c;
          y[o] = best;
          argmax[o] = at;
        }
}

/** dx = 0, then dx[argmax[i]] += dy[i]. */
function maxPoolBackward(dy: Float32Array, argmax: Int32Array, dx: Float32Array, g: Pool2DGeometry): void {
  const acc = new Float64Array(g.N * g.H * g.W * g.C);
  const count = g.N * g.OH * g.OW * g.C;
  for (let i = 0; i < count; i++) if (argmax[i] >= 0) acc[argmax[i]] += dy[i];
  for (let i = 0; i < acc.length; i++) dx[i] = acc[i];
}

/** Mean over in-image window cells (count_include_pad = false); 0 for an all-padding window. */
function avgPoolForward(x: Float32Array, y: Float32Array, g: Pool2DGeometry): void {
  const { N, H, W, C, KH, KW, strideH, strideW, padTop, padLeft, OH, OW } = g;
  for (let n = 0; n < N; n++)
    for (let oh = 0; oh < OH; oh++)
      for (let ow = 0; ow < OW; ow++)
        for (let c = 0; c < C; c++) {
          let s = 0,
            count = 0;
          for (let kh = 0; kh < KH; kh++)
            for (let kw = 0; kw < KW; kw++) {
              const ih = oh * strideH - padTop + kh,
                iw = ow * strideW - padLeft + kw;
              if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
              s += x[xIndex(g, n, ih, iw, c)];
              count++;
            }
          y[((n * OH + oh) * OW + ow) * C + c] = count > 0 ? s / count : 0;
        }
}

/** dx (overwritten) = ∂⟨dy, avgPool(x)⟩/∂x. */
function avgPoolBackward(dy: Float32Array, dx: Float32Array, g: Pool2DGeometry): void {
  const { N, H, W, C, KH, KW, strideH, strideW, padTop, padLeft, OH, OW } = g;
  const acc = new Float64Array(N * H * W * C);
  for (let n = 0; n < N; n++)
    for (let oh = 0; oh < OH; oh++)
      for (let ow = 0; ow < OW; ow++)
        for (let c = 0; c < C; c++) {
          let count = 0;
          for (let kh = 0; kh < KH; kh++)
            for (let kw = 0; kw < KW; kw++) {
              const ih = oh * strideH - padTop + kh,
                iw = ow * strideW - padLeft + kw;
              if (ih >= 0 && ih < H && iw >= 0 && iw < W) count++;
            }
          if (count === 0) continue;
          const share = dy[((n * OH + oh) * OW + ow) * C + c] / count;
          for (let kh = 0; kh < KH; kh++)
            for (let kw = 0; kw < KW; kw++) {
              const ih = oh * strideH - padTop + kh,
                iw = ow * strideW - padLeft + kw;
              if (ih >= 0 && ih < H && iw >= 0 && iw < W) acc[xIndex(g, n, ih, iw, c)] += share;
            }
        }
  for (let i = 0; i < acc.length; i++) dx[i] = acc[i];
}

function biasAdd(x: Float32Array, bias: Float32Array, y: Float32Array, rows: number, cols: number): void {
  for (let r = 0; r < rows; r++) for (let c = 0; c < cols; c++) y[r * cols + c] = x[r * cols + c] + bias[c];
}

function biasGrad(dy: Float32Array, db: Float32Array, rows: number, cols: number): void {
  for (let c = 0; c < cols; c++) {
    let s = 0;
    for (let r = 0; r < rows; r++) s += dy[r * cols + c];
    db[c] += s;
  }
}

function activationForward(kind: ActivationKind, x: Float32Array, y: Float32Array, cap = 20): void {
  for (let i = 0; i < x.length; i++) {
    const v = x[i];
    switch (kind) {
      case 'relu':
        y[i] = Math.max(v, 0);
        break;
      case 'clippedRelu':
        y[i] = Math.min(Math.max(v, 0), cap);
        break;
      case 'tanh':
        y[i] = Math.tanh(v);
        break;
      case 'sigmoid':
        y[i] = 1 / (1 + Math.exp(-v));
        break;
      case 'linear':
        y[i] = v;
        break;
    }
  }
}

/** Derivatives written in terms of the forward output y, as the Backend contract asks. */
function activationBackward(kind: ActivationKind, y: Float32Array, dy: Float32Array, dx: Float32Array, cap = 20): void {
  for (let i = 0; i < y.length; i++) {
    const v = y[i];
    let d = 1;
    switch (kind) {
      case 'relu':
        d = v > 0 ? 1 : 0;
        break;
      case 'clippedRelu':
        d = v > 0 && v < cap ? 1 : 0;
        break;
      case 'tanh':
        d = 1 - v * v;
        break;
      case 'sigmoid':
        d = v * (1 - v);
        break;
      case 'linear':
        d = 1;
        break;
    }
    dx[i] = dy[i] * d;
  }
}

/** Σ_r (log Σ_j e^{z_rj} − z_r,label) and dlogits = (softmax − onehot)·gradScale, in float64. */
function softmaxCrossEntropy(
  logits: Float32Array,
  labels: Int32Array,
  rows: number,
  classes: number,
  dlogits: Float32Array,
  gradScale: number,
): number {
  let total = 0;
  const z = new Float64Array(classes);
  for (let r = 0; r < rows; r++) {
    const label = labels[r];
    if (!(label >= 0 && label < classes)) throw new Error(`softmaxCrossEntropy: row ${r} has label ${label}`);
    let max = -Infinity;
    for (let j = 0; j < classes; j++) {
      z[j] = logits[r * classes + j];
      max = Math.max(max, z[j]);
    }
    let sum = 0;
    for (let j = 0; j < classes; j++) sum += Math.exp(z[j] - max);
    total += Math.log(sum) + max - z[label];
    for (let j = 0; j < classes; j++)
      dlogits[r * classes + j] = (Math.exp(z[j] - max) / sum - (j === label ? 1 : 0)) * gradScale;
  }
  return total;
}

export const referenceBackend: ReferenceBackend = {
  gemm,
  conv2dForward,
  conv2dBackwardData,
  conv2dBackwardFilter,
  maxPoolForward,
  maxPoolBackward,
  avgPoolForward,
  avgPoolBackward,
  biasAdd,
  biasGrad,
  activationForward,
  activationBackward,
  softmaxCrossEntropy,
};

// ---------------------------------------------------------------------------------------------
// Geometry and shared cases

/** Explicit padding [top, bottom, left, right]; output size is floor((H + top + bottom − KH)/sh) + 1. */
export type Padding = readonly [number, number, number, number];

/** TensorFlow 'same' padding for one axis: output ceil(size/stride), the odd extra cell after. */
export function samePadding(size: number, kernel: number, stride: number): [number, number] {
  const out = Math.ceil(size / stride);
  const total = Math.max((out - 1) * stride + kernel - size, 0);
  const before = Math.floor(total / 2);
  return [before, total - before];
}

export function convGeometry(
  N: number,
  H: number,
  W: number,
  C: number,
  KH: number,
  KW: number,
  F: number,
  strideH: number,
  strideW: number,
  pad: Padding | 'valid' | 'same',
): Conv2DGeometry {
  let p: Padding;
  if (pad === 'valid') p = [0, 0, 0, 0];
  else if (pad === 'same') p = [...samePadding(H, KH, strideH), ...samePadding(W, KW, strideW)];
  else p = pad;
  const OH = Math.floor((H + p[0] + p[1] - KH) / strideH) + 1;
  const OW = Math.floor((W + p[2] + p[3] - KW) / strideW) + 1;
  if (OH <= 0 || OW <= 0) throw new Error(`convGeometry: empty output for H=${H} W=${W} KH=${KH} KW=${KW}`);
  return { N, H, W, C, KH, KW, F, strideH, strideW, padTop: p[0], padLeft: p[2], OH, OW };
}

export function poolGeometry(
  N: number,
  H: number,
  W: number,
  C: number,
  KH: number,
  KW: number,
  strideH: number,
  strideW: number,
  pad: Padding | 'valid' | 'same',
): Pool2DGeometry {
  const { F: _f, ...g } = convGeometry(N, H, W, C, KH, KW, 1, strideH, strideW, pad);
  return g;
}

export function describeConv(g: Conv2DGeometry): string {
  return (
    `N${g.N} ${g.H}x${g.W}x${g.C} k${g.KH}x${g.KW} F${g.F} s${g.strideH},${g.strideW} ` +
    `pad${g.padTop},${g.padLeft} out${g.OH}x${g.OW}`
  );
}

export function describePool(g: Pool2DGeometry): string {
  return `N${g.N} ${g.H}x${g.W}x${g.C} k${g.KH}x${g.KW} s${g.strideH},${g.strideW} pad${g.padTop},${g.padLeft} out${g.OH}x${g.OW}`;
}

/**
 * Convolution shapes every backend is tested on: odd sizes, C and F of 1, strides 1/2/3, 'valid',
 * TF-'same' (asymmetric when the total is odd) and explicit asymmetric padding, non-square
 * kernels, kernels larger than the image, 1×1 (both the pointwise fast path and strided).
 */
export const CONV_CASES: readonly Conv2DGeometry[] = [
  convGeometry(1, 1, 1, 1, 1, 1, 1, 1, 1, 'valid'),
  convGeometry(2, 7, 7, 3, 3, 3, 5, 1, 1, 'valid'),
  convGeometry(2, 7, 9, 1, 3, 3, 1, 1, 1, 'same'),
  convGeometry(1, 8, 8, 4, 3, 3, 7, 2, 2, 'same'),
  convGeometry(3, 10, 7, 5, 2, 3, 6, 2, 3, 'same'),
  convGeometry(1, 11, 11, 2, 5, 5, 3, 3, 3, 'valid'),
  convGeometry(2, 9, 6, 3, 1, 1, 4, 1, 1, 'valid'),
  convGeometry(2, 9, 6, 3, 1, 1, 4, 2, 2, 'valid'),
  convGeometry(1, 6, 5, 7, 3, 2, 1, 1, 1, [2, 0, 0, 1]),
  convGeometry(2, 13, 13, 16, 3, 3, 33, 1, 1, 'same'),
  convGeometry(1, 5, 5, 3, 7, 7, 2, 1, 1, 'same'),
  convGeometry(2, 28, 28, 1, 3, 3, 32, 1, 1, 'valid'),
  convGeometry(1, 10, 11, 3, 2, 2, 65, 3, 3, 'valid'),
  convGeometry(1, 7, 7, 1, 3, 1, 3, 1, 2, [1, 2, 0, 0]),
];

/**
 * Pooling shapes: the usual 2×2/2, overlapping 3×3/2 and 3×3/1 windows, padding before and
 * (implied) after, a window bigger than the image, non-square windows and strides.
 */
export const POOL_CASES: readonly Pool2DGeometry[] = [
  poolGeometry(1, 1, 1, 1, 1, 1, 1, 1, 'valid'),
  poolGeometry(2, 28, 28, 8, 2, 2, 2, 2, 'valid'),
  poolGeometry(1, 7, 9, 3, 3, 3, 2, 2, [1, 1, 1, 1]),
  poolGeometry(2, 6, 5, 1, 3, 3, 1, 1, 'same'),
  poolGeometry(1, 7, 8, 5, 2, 3, 1, 2, [1, 0, 0, 1]),
  poolGeometry(1, 8, 8, 2, 3, 3, 3, 3, [0, 1, 0, 1]),
  poolGeometry(2, 2, 3, 3, 3, 3, 1, 1, [1, 1, 1, 1]),
  poolGeometry(1, 9, 7, 33, 3, 2, 2, 3, 'same'),
];

export function convSizes(g: Conv2DGeometry): { x: number; w: number; y: number } {
  return { x: g.N * g.H * g.W * g.C, w: g.KH * g.KW * g.C * g.F, y: g.N * g.OH * g.OW * g.F };
}

export function poolSizes(g: Pool2DGeometry): { x: number; y: number } {
  return { x: g.N * g.H * g.W * g.C, y: g.N * g.OH * g.OW * g.C };
}

/** ⟨a, b⟩ in float64. */
export function dot64(a: ArrayLike<number>, b: ArrayLike<number>): number {
  let s = 0;
  for (let i = 0; i < a.length; i++) s += a[i] * b[i];
  return s;
}

/** Σ |a_i·b_i| in float64: the scale an adjoint identity's rounding error is relative to. */
export function absDot64(a: ArrayLike<number>, b: ArrayLike<number>): number {
  let s = 0;
  for (let i = 0; i < a.length; i++) s += Math.abs(a[i] * b[i]);
  return s;
}

/**
 * The convolution's backward passes are the adjoints of its forward: ⟨dy, conv(x, w)⟩ must equal
 * ⟨dx, x⟩ and ⟨dw, w⟩ (float64 sums, relative tolerance 1e-5). Checks `backend` on every case.
 */
export function assertConvAdjoint(
  backend: Pick<Backend, 'conv2dForward' | 'conv2dBackwardData' | 'conv2dBackwardFilter'>,
  cases: readonly Conv2DGeometry[],
  randomArray: (n: number, seed: number) => Float32Array,
): void {
  cases.forEach((g, i) => {
    const s = convSizes(g);
    const x = randomArray(s.x, 110 + i),
      w = randomArray(s.w, 120 + i),
      dy = randomArray(s.y, 130 + i);
    const y = new Float32Array(s.y),
      dx = new Float32Array(s.x),
      dw = new Float32Array(s.w);
    backend.conv2dForward(x, w, null, y, g);
    backend.conv2dBackwardData(dy, w, dx, g);
    backend.conv2dBackwardFilter(x, dy, dw, null, g);
    const lhs = dot64(dy, y),
      eps = 1e-5 * absDot64(dy, y) + 1e-6;
    if (Math.abs(dot64(dx, x) - lhs) > eps)
      throw new Error(`${describeConv(g)}: ⟨dx,x⟩ ${dot64(dx, x)} vs ⟨dy,y⟩ ${lhs}`);
    if (Math.abs(dot64(dw, w) - lhs) > eps)
      throw new Error(`${describeConv(g)}: ⟨dw,w⟩ ${dot64(dw, w)} vs ⟨dy,y⟩ ${lhs}`);
  });
}
