import { windowOutputSize, samePaddingBefore } from '../tensor/shape.ts';
import type { Pool2DGeometry } from '../kernels/backend.ts';
import type { Padding } from './spec.ts';

/**
 * Geometry of a sliding window (convolution or pooling) over an [H, W, C] input, batch excluded;
 * `fail` builds the error that names the layer.
 */
export function windowGeometry(inputShape: readonly number[], window: [number, number], strides: [number, number],
                               padding: Padding, what: string, fail: (message: string) => Error): Omit<Pool2DGeometry, 'N'> {
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
    H, W, C, KH, KW, strideH, strideW,
    padTop: padding === 'same' ? samePaddingBefore(H, KH, strideH) : 0,
    padLeft: padding === 'same' ? samePaddingBefore(W, KW, strideW) : 0,
    OH: windowOutputSize(H, KH, strideH, padding),
    OW: windowOutputSize(W, KW, strideW, padding),
  };
}
