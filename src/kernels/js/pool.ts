import type { Pool2DGeometry } from '../poolKernels.ts';

/**
 * 2-D max and average pooling over NHWC images. Each output pixel's window is clipped to the
 * image first, so padding is never read: it never wins a max and never counts in an average.
 * The innermost loop runs over the C contiguous channels.
 */

/** y[n,oh,ow,c] = max over the window; argmax receives the flat index into x (ties: first in kh, kw order). */
export function maxPoolForward(x: Float32Array, y: Float32Array, argmax: Int32Array, g: Pool2DGeometry): void {
  const { N, H, W, C, KH, KW, strideH, strideW, padTop, padLeft, OH, OW } = g;
  let o = 0;
  for (let n = 0; n < N; n++) {
    for (let oh = 0; oh < OH; oh++) {
      const ih0 = oh * strideH - padTop;
      const hLo = Math.max(0, ih0),
        hHi = Math.min(H, ih0 + KH);
      for (let ow = 0; ow < OW; ow++, o += C) {
        const iw0 = ow * strideW - padLeft;
        const wLo = Math.max(0, iw0),
          wHi = Math.min(W, iw0 + KW);
        if (hLo >= hHi || wLo >= wHi) {
          // A window wholly in the padding has no input to take: 0, routed nowhere.
          for (let c = 0; c < C; c++) {
            y[o + c] = 0;
            argmax[o + c] = -1;
          }
          continue;
        }
        // Start from the first cell of the window, then scan the rest.
        const first = ((n * H + hLo) * W + wLo) * C;
        for (let c = 0; c < C; c++) {
          y[o + c] = x[first + c];
          argmax[o + c] = first + c;
        }
        for (let ih = hLo; ih < hHi; ih++) {
          for (let iw = ih === hLo ? wLo + 1 : wLo; iw < wHi; iw++) {
            const base = ((n * H + ih) * W + iw) * C;
            for (let c = 0; c < C; c++) {
              const v = x[base + c];
              const best = y[o + c];
              // Strictly greater keeps the first of ties; NaN wins, as in PyTorch.
              if (v > best || Number.isNaN(v)) {
                y[o + c] = v;
                argmax[o + c] = base + c;
              }
            }
          }
        }
      }
    }
  }
}

/** dx (overwritten) = dy scattered through argmax; overlapping windows add up. */
export function maxPoolBackward(dy: Float32Array, argmax: Int32Array, dx: Float32Array, g: Pool2DGeometry): void {
  const { N, H, W, C, OH, OW } = g;
  dx.fill(0, 0, N * H * W * C);
  const count = N * OH * OW * C;
  for (let i = 0; i < count; i++) {
    const j = argmax[i];
    if (j >= 0) dx[j] += dy[i];
  }
}

/** y = mean over the window's in-image cells (count_include_pad = false); 0 for a window wholly in padding. */
export function avgPoolForward(x: Float32Array, y: Float32Array, g: Pool2DGeometry): void {
  const { N, H, W, C, KH, KW, strideH, strideW, padTop, padLeft, OH, OW } = g;
  let o = 0;
  for (let n = 0; n < N; n++) {
    for (let oh = 0; oh < OH; oh++) {
      const ih0 = oh * strideH - padTop;
      const hLo = Math.max(0, ih0),
        hHi = Math.min(H, ih0 + KH);
      for (let ow = 0; ow < OW; ow++, o += C) {
        const iw0 = ow * strideW - padLeft;
        const wLo = Math.max(0, iw0),
          wHi = Math.min(W, iw0 + KW);
        const cells = Math.max(0, hHi - hLo) * Math.max(0, wHi - wLo);
        for (let c = 0; c < C; c++) y[o + c] = 0;
        if (cells === 0) continue;
        for (let ih = hLo; ih < hHi; ih++) {
          for (let iw = wLo; iw < wHi; iw++) {
            const base = ((n * H + ih) * W + iw) * C;
            for (let c = 0; c < C; c++) y[o + c] += x[base + c];
          }
        }
        const inv = 1 / cells;
        for (let c = 0; c < C; c++) y[o + c] *= inv;
      }
    }
  }
}

/** dx (overwritten): each output's gradient shared equally by its window's in-image cells. */
export function avgPoolBackward(dy: Float32Array, dx: Float32Array, g: Pool2DGeometry): void {
  const { N, H, W, C, KH, KW, strideH, strideW, padTop, padLeft, OH, OW } = g;
  dx.fill(0, 0, N * H * W * C);
  let o = 0;
  for (let n = 0; n < N; n++) {
    for (let oh = 0; oh < OH; oh++) {
      const ih0 = oh * strideH - padTop;
      const hLo = Math.max(0, ih0),
        hHi = Math.min(H, ih0 + KH);
      for (let ow = 0; ow < OW; ow++, o += C) {
        const iw0 = ow * strideW - padLeft;
        const wLo = Math.max(0, iw0),
          wHi = Math.min(W, iw0 + KW);
        const cells = Math.max(0, hHi - hLo) * Math.max(0, wHi - wLo);
        if (cells === 0) continue;
        const inv = 1 / cells;
        for (let ih = hLo; ih < hHi; ih++) {
          for (let iw = wLo; iw < wHi; iw++) {
            const base = ((n * H + ih) * W + iw) * C;
            for (let c = 0; c < C; c++) dx[base + c] += dy[o + c] * inv;
          }
        }
      }
    }
  }
}
