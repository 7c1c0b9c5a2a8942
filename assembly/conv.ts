// 2-D convolution, NHWC activations, [KH,KW,C,F] filters, via im2col + the packed gemm.
// Work is chunked over output pixels so the column buffer (`col`, `colBytes` of scratch given by
// the caller) stays near L2 size. A 1×1, stride-1, unpadded convolution skips im2col entirely.

import { at, zeroF32, copyF32, addF32 } from './simd';
import { gemmStrided } from './gemm';

/** Target size of one im2col chunk; tunable (see setConvChunkBytes). */
let chunkBytes: i32 = 256 * 1024;

export function setConvChunkBytes(bytes: i32): void {
  chunkBytes = max(4096, bytes);
}

function chunkRows(K: i32, total: i32, colBytes: i32): i32 {
  const rowBytes = K * 4;
  let rows = chunkBytes / rowBytes;
  rows = max(rows, 16);
  rows = min(rows, colBytes / rowBytes);
  return max(1, min(rows, total));
}

/** col[r, (kh*KW + kw)*C + c] = x[n, oh*sh - pt + kh, ow*sw - pl + kw, c] (0 outside), for output pixels r0..r0+rows. */
function im2col(x: usize, r0: i32, rows: i32, H: i32, W: i32, C: i32, KH: i32, KW: i32,
                sh: i32, sw: i32, pt: i32, pl: i32, OH: i32, OW: i32, col: usize): void {
  const K = KH * KW * C;
  const KWC = KW * C;
  const plane = OH * OW;
  let n = r0 / plane, rem = r0 % plane;
  let oh = rem / OW, ow = rem % OW;
  for (let r = 0; r < rows; r++) {
    let d = at(col, r * K);
    const iw0 = ow * sw - pl;
    const fullW = iw0 >= 0 && iw0 + KW <= W;
    for (let kh = 0; kh < KH; kh++) {
      const ih = oh * sh - pt + kh;
      if (ih < 0 || ih >= H) {
        zeroF32(d, KWC);
      } else {
        const rowBase = (n * H + ih) * W;
        if (fullW) {
          copyF32(d, at(x, (rowBase + iw0) * C), KWC);
        } else {
          for (let kw = 0; kw < KW; kw++) {
            const iw = iw0 + kw;
            const dd = at(d, kw * C);
            if (iw < 0 || iw >= W) zeroF32(dd, C);
            else copyF32(dd, at(x, (rowBase + iw) * C), C);
          }
        }
      }
      d = at(d, KWC);
    }
    if (++ow == OW) { ow = 0; if (++oh == OH) { oh = 0; n++; } }
  }
}

/** dx[n, ih, iw, c] += dcol[r, (kh*KW + kw)*C + c]: the adjoint of im2col. */
function col2imAdd(dcol: usize, r0: i32, rows: i32, H: i32, W: i32, C: i32, KH: i32, KW: i32,
                   sh: i32, sw: i32, pt: i32, pl: i32, OH: i32, OW: i32, dx: usize): void {
  const K = KH * KW * C;
  const KWC = KW * C;
  const plane = OH * OW;
  let n = r0 / plane, rem = r0 % plane;
  let oh = rem / OW, ow = rem % OW;
  for (let r = 0; r < rows; r++) {
    let s = at(dcol, r * K);
    const iw0 = ow * sw - pl;
    const fullW = iw0 >= 0 && iw0 + KW <= W;
    for (let kh = 0; kh < KH; kh++) {
      const ih = oh * sh - pt + kh;
      if (ih >= 0 && ih < H) {
        const rowBase = (n * H + ih) * W;
        if (fullW) {
          addF32(at(dx, (rowBase + iw0) * C), s, KWC);
        } else {
          for (let kw = 0; kw < KW; kw++) {
            const iw = iw0 + kw;
            if (iw >= 0 && iw < W) addF32(at(dx, (rowBase + iw) * C), at(s, kw * C), C);
          }
        }
      }
      s = at(s, KWC);
    }
    if (++ow == OW) { ow = 0; if (++oh == OH) { oh = 0; n++; } }
  }
}

function isPointwise(H: i32, W: i32, KH: i32, KW: i32, sh: i32, sw: i32, pt: i32, pl: i32, OH: i32, OW: i32): bool {
  return KH == 1 && KW == 1 && sh == 1 && sw == 1 && pt == 0 && pl == 0 && OH == H && OW == W;
}

function fillBias(y: usize, rows: i32, F: i32, bias: usize): void {
  for (let r = 0; r < rows; r++) copyF32(at(y, r * F), bias, F);
}

export function conv2dForward(x: usize, w: usize, bias: usize, y: usize,
                              N: i32, H: i32, W: i32, C: i32, KH: i32, KW: i32, F: i32,
                              sh: i32, sw: i32, pt: i32, pl: i32, OH: i32, OW: i32,
                              col: usize, colBytes: i32): void {
  const K = KH * KW * C;
  const total = N * OH * OW;
  if (isPointwise(H, W, KH, KW, sh, sw, pt, pl, OH, OW)) {
    if (bias) fillBias(y, total, F, bias);
    gemmStrided(false, false, total, F, K, 1, x, K, w, F, bias ? 1 : 0, y, F);
    return;
  }
  const step = chunkRows(K, total, colBytes);
  for (let r0 = 0; r0 < total; r0 += step) {
    const rows = min(step, total - r0);
    im2col(x, r0, rows, H, W, C, KH, KW, sh, sw, pt, pl, OH, OW, col);
    const yc = at(y, r0 * F);
    if (bias) fillBias(yc, rows, F, bias);
    gemmStrided(false, false, rows, F, K, 1, col, K, w, F, bias ? 1 : 0, yc, F);
  }
}

export function conv2dBackwardData(dy: usize, w: usize, dx: usize,
                                   N: i32, H: i32, W: i32, C: i32, KH: i32, KW: i32, F: i32,
                                   sh: i32, sw: i32, pt: i32, pl: i32, OH: i32, OW: i32,
                                   col: usize, colBytes: i32): void {
  const K = KH * KW * C;
  const total = N * OH * OW;
  if (isPointwise(H, W, KH, KW, sh, sw, pt, pl, OH, OW)) {
    gemmStrided(false, true, total, K, F, 1, dy, F, w, F, 0, dx, K);
    return;
  }
  zeroF32(dx, N * H * W * C);
  const step = chunkRows(K, total, colBytes);
  for (let r0 = 0; r0 < total; r0 += step) {
    const rows = min(step, total - r0);
    // dcol[rows×K] = dy[rows×F] · wᵀ  (w is K×F)
    gemmStrided(false, true, rows, K, F, 1, at(dy, r0 * F), F, w, F, 0, col, K);
    col2imAdd(col, r0, rows, H, W, C, KH, KW, sh, sw, pt, pl, OH, OW, dx);
  }
}

export function conv2dBackwardFilter(x: usize, dy: usize, dw: usize,
                                     N: i32, H: i32, W: i32, C: i32, KH: i32, KW: i32, F: i32,
                                     sh: i32, sw: i32, pt: i32, pl: i32, OH: i32, OW: i32,
                                     col: usize, colBytes: i32): void {
  const K = KH * KW * C;
  const total = N * OH * OW;
  if (isPointwise(H, W, KH, KW, sh, sw, pt, pl, OH, OW)) {
    gemmStrided(true, false, K, F, total, 1, x, K, dy, F, 1, dw, F);
    return;
  }
  const step = chunkRows(K, total, colBytes);
  for (let r0 = 0; r0 < total; r0 += step) {
    const rows = min(step, total - r0);
    im2col(x, r0, rows, H, W, C, KH, KW, sh, sw, pt, pl, OH, OW, col);
    // dw[K×F] += colᵀ · dy[rows×F]
    gemmStrided(true, false, K, F, rows, 1, col, K, at(dy, r0 * F), F, 1, dw, F);
  }
}
