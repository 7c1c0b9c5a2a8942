/** The Backend's 2-D max and average pooling kernels, and their geometry. */

export interface Pool2DGeometry {
  N: number;
  H: number;
  W: number;
  C: number;
  KH: number;
  KW: number;
  strideH: number;
  strideW: number;
  padTop: number;
  padLeft: number;
  OH: number;
  OW: number;
}

export interface PoolingKernels {
  /** Max pool; `argmax[i]` receives the flat input index of output i's maximum. Padding never wins. */
  maxPoolForward(x: Float32Array, y: Float32Array, argmax: Int32Array, g: Pool2DGeometry): void;
  /** dx (overwritten) receives dy routed through argmax. */
  maxPoolBackward(dy: Float32Array, argmax: Int32Array, dx: Float32Array, g: Pool2DGeometry): void;
  /** Average pool; padded cells are excluded from the count (count_include_pad = false). */
  avgPoolForward(x: Float32Array, y: Float32Array, g: Pool2DGeometry): void;
  avgPoolBackward(dy: Float32Array, dx: Float32Array, g: Pool2DGeometry): void;
}
