import { windowOutputSize, samePaddingBefore } from '../tensor/shape.ts';
import type { Pool2DGeometry } from '../kernels/poolKernels.ts';
import type { Padding } from './spec.ts';

/**
 * Geometry of a sliding window (convolution or pooling) over an [H, W, C] input, batch excluded;
 * `fail` builds the error that names the layer.
 */
export function windowGeometry(
  inputShape: readonly number[],
  window: [number, number],
  strides: [number, number],
  padding: Padding,
  what: string,
  fail: (message: string) => Error,
): Omit<Pool2DGeometry, 'N'> {
  if (inputShape.length !== 3) {
    throw fail(`expects an image input [height, width, channels] but receives [${inputShape.join(', ')}]`);
  }
  const [H, W, C] = inputShape as [number, number, number];
  const [KH, KW] = window;
  const [strideH, strideW] = strides;
  if (padding === 'valid' && (KH > H || KW > W)) {
    throw fail(`${what} ${KH}×${KW} is larger than its ${H}×${W} input; use padding: same or a smaller window`);
  }
  return {
    H,
    W,
    C,
    KH,
    KW,
    strideH,
    strideW,
    padTop: padding === 'same' ? samePaddingBefore(H, KH, strideH) : 0,
    padLeft: padding === 'same' ? samePaddingBefore(W, KW, strideW) : 0,
    OH: windowOutputSize(H, KH, strideH, padding),
    OW: windowOutputSize(W, KW, strideW, padding),
  };
}

/** A half-open range [start, end) of rows or columns. */
export interface AxisRange {
  start: number;
  end: number;
}

/**
 * Along one axis of a window layer (input `size`, `kernel`, `stride`, leading padding `padBefore`):
 * the input range that the outputs `out` read, clipped to the image, and `pad`, how many of the
 * window's leading positions fall before the image (zero padding the tile keeps). Rows past `end`
 * that windows still reach are the image's own trailing padding.
 */
export function windowInputRange(
  out: AxisRange,
  size: number,
  kernel: number,
  stride: number,
  padBefore: number,
): AxisRange & { pad: number } {
  const first = out.start * stride - padBefore;
  const last = (out.end - 1) * stride - padBefore + kernel;
  const start = Math.max(0, first);
  return { start, end: Math.min(size, last), pad: start - first };
}

/**
 * The geometry of a window layer computing only output rows `rows` and columns `cols`: its input
 * is the clipped range windowInputRange gives, with that range's own leading padding. Running the
 * layer's kernels on this geometry gives exactly those outputs of the whole image.
 */
export function tileWindowGeometry<G extends Omit<Pool2DGeometry, 'N'>>(
  g: G,
  rows: AxisRange,
  cols: AxisRange,
): { geometry: G; inRows: AxisRange; inCols: AxisRange } {
  const r = windowInputRange(rows, g.H, g.KH, g.strideH, g.padTop);
  const c = windowInputRange(cols, g.W, g.KW, g.strideW, g.padLeft);
  return {
    geometry: {
      ...g,
      H: r.end - r.start,
      W: c.end - c.start,
      padTop: r.pad,
      padLeft: c.pad,
      OH: rows.end - rows.start,
      OW: cols.end - cols.start,
    },
    inRows: { start: r.start, end: r.end },
    inCols: { start: c.start, end: c.end },
  };
}
