import type { Conv2DGeometry } from '../convKernels.ts';

/**
 * The im2col matrix of a convolution has one row per output pixel p = (n, oh, ow), in NHWC order,
 * and KH·KW·C columns ordered (kh, kw, c) — the row-major order of a [KH, KW, C, F] weight, so
 * y[p, :] = col[p, :] · w[KH·KW·C, F]. Rows are produced for a range [p0, p1) so callers can
 * bound the scratch memory.
 */

/** col[(p − p0)·KH·KW·C + …] = the receptive field of output pixel p (zeros for padding), for p in [p0, p1). */
export function im2col(x: Float32Array, g: Conv2DGeometry, p0: number, p1: number, col: Float32Array): void {
  const { H, W, C, KH, KW, strideH, strideW, padTop, padLeft, OH, OW } = g;
  const OHW = OH * OW;
  const KWC = KW * C;
  let dst = 0;
  for (let p = p0; p < p1; p++) {
    const n = (p / OHW) | 0;
    const r = p - n * OHW;
    const oh = (r / OW) | 0;
    const ow = r - oh * OW;
    const ih0 = oh * strideH - padTop;
    const iw0 = ow * strideW - padLeft;
    // Columns kw in [kwLo, kwHi) fall inside the image; they are contiguous in x.
    const kwLo = iw0 < 0 ? Math.min(-iw0, KW) : 0;
    const kwHi = Math.max(kwLo, Math.min(KW, W - iw0));
    const zeroBefore = kwLo * C;
    const copyLen = (kwHi - kwLo) * C;
    const zeroAfter = (KW - kwHi) * C;
    for (let kh = 0; kh < KH; kh++) {
      const ih = ih0 + kh;
      if (ih < 0 || ih >= H) {
        col.fill(0, dst, dst + KWC);
        dst += KWC;
        continue;
      }
      for (let i = 0; i < zeroBefore; i++) col[dst++] = 0;
      let src = ((n * H + ih) * W + iw0 + kwLo) * C;
      for (let i = 0; i < copyLen; i++) col[dst++] = x[src++];
      for (let i = 0; i < zeroAfter; i++) col[dst++] = 0;
    }
  }
}

/** The adjoint of im2col: dx[n, ih, iw, c] += col entries that were copied from it, for p in [p0, p1). */
export function col2im(col: Float32Array, g: Conv2DGeometry, p0: number, p1: number, dx: Float32Array): void {
  const { H, W, C, KH, KW, strideH, strideW, padTop, padLeft, OH, OW } = g;
  const OHW = OH * OW;
  const KWC = KW * C;
  let src = 0;
  for (let p = p0; p < p1; p++) {
    const n = (p / OHW) | 0;
    const r = p - n * OHW;
    const oh = (r / OW) | 0;
    const ow = r - oh * OW;
    const ih0 = oh * strideH - padTop;
    const iw0 = ow * strideW - padLeft;
    const kwLo = iw0 < 0 ? Math.min(-iw0, KW) : 0;
    const kwHi = Math.max(kwLo, Math.min(KW, W - iw0));
    const skipBefore = kwLo * C;
    const addLen = (kwHi - kwLo) * C;
    const skipAfter = (KW - kwHi) * C;
    for (let kh = 0; kh < KH; kh++) {
      const ih = ih0 + kh;
      if (ih < 0 || ih >= H) {
        src += KWC;
        continue;
      }
      src += skipBefore;
      let dst = ((n * H + ih) * W + iw0 + kwLo) * C;
      for (let i = 0; i < addLen; i++) dx[dst++] += col[src++];
      src += skipAfter;
    }
  }
}
