/** The Backend's 2-D convolution kernels, plain and fused with an activation or a max pool, and their geometry. */
import type { ActivationKind } from './activation.ts';
import type { Pool2DGeometry } from './poolKernels.ts';

export interface Conv2DGeometry {
  /** batch, input height, width, channels */
  N: number;
  H: number;
  W: number;
  C: number;
  /** kernel height, width; output channels (filters) */
  KH: number;
  KW: number;
  F: number;
  strideH: number;
  strideW: number;
  /** zero padding before the first row/column; padding after is implied by OH/OW */
  padTop: number;
  padLeft: number;
  /** output height and width */
  OH: number;
  OW: number;
}

export interface ConvolutionKernels {
  /** y[N,OH,OW,F] = conv(x[N,H,W,C], w[KH,KW,C,F]) (+ bias[F] when given). */
  conv2dForward(x: Float32Array, w: Float32Array, bias: Float32Array | null, y: Float32Array, g: Conv2DGeometry): void;
  /**
   * Optional: conv2dForward, then y = f(y) in the same pass (activationForward's result, bit for bit),
   * where the backend fuses the two. Returns false, writing nothing, when it does not fuse `kind` for
   * this shape: the caller then makes the two calls.
   */
  conv2dForwardActivation?(
    kind: ActivationKind,
    x: Float32Array,
    w: Float32Array,
    bias: Float32Array | null,
    y: Float32Array,
    g: Conv2DGeometry,
    cap?: number,
  ): boolean;
  /**
   * Optional: a convolution, activation `kind` and a max pool `pool` whose windows tile the
   * convolution's output (stride = window, no padding), in one pass that never writes the
   * convolution's output: `y` and `argmax` exactly as maxPoolForward gives them on
   * activationForward(conv2dForward(x)) — argmax indexes that [N, OH, OW, F] output. Returns false,
   * writing nothing, when the backend does not fuse this kind or shape.
   */
  convPoolForward?(
    kind: ActivationKind,
    x: Float32Array,
    w: Float32Array,
    bias: Float32Array | null,
    y: Float32Array,
    argmax: Int32Array,
    g: Conv2DGeometry,
    pool: Pool2DGeometry,
    cap?: number,
  ): boolean;
  /**
   * Optional, after convPoolForward: conv2dBackwardFilter with the convolution's output gradient
   * taken as `dyPool` scattered through `argmax` (maxPoolBackward's dx), without writing it. With
   * `through`, dyPool is the gradient of the pool's output `through.y` before the activation's
   * backward, which the call applies (activationBackward on the pool's output). False, accumulating
   * nothing, when the backend does not fuse this shape or activation.
   */
  conv2dBackwardFilterPooled?(
    x: Float32Array,
    dyPool: Float32Array,
    argmax: Int32Array,
    dw: Float32Array,
    db: Float32Array | null,
    g: Conv2DGeometry,
    pool: Pool2DGeometry,
    through?: { kind: ActivationKind; y: Float32Array; cap?: number },
  ): boolean;
  /** dx[N,H,W,C] = gradient of the convolution w.r.t. its input (overwritten). */
  conv2dBackwardData(dy: Float32Array, w: Float32Array, dx: Float32Array, g: Conv2DGeometry): void;
  /** dw[KH,KW,C,F] += gradient w.r.t. the filter; db[F] += sum of dy when given. */
  conv2dBackwardFilter(
    x: Float32Array,
    dy: Float32Array,
    dw: Float32Array,
    db: Float32Array | null,
    g: Conv2DGeometry,
  ): void;
}
