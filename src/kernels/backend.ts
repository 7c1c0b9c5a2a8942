/**
 * The kernel backend contract. Every layer computes through one of these; backends differ only
 * in speed. All arrays are row-major Float32Array views (possibly into a larger flat buffer);
 * images are NHWC, conv weights are [KH, KW, C, F], dense weights are [in, out].
 *
 * Conventions:
 * - Outputs named `y`/`dx` are overwritten.
 * - Parameter gradients (`dw`, `db`) are ACCUMULATED into (+=), so micro-batches and several
 *   backward passes can add up; the training loop zeroes gradients before each step.
 */

export interface Conv2DGeometry {
  /** batch, input height, width, channels */
  N: number; H: number; W: number; C: number;
  /** kernel height, width; output channels (filters) */
  KH: number; KW: number; F: number;
  strideH: number; strideW: number;
  /** zero padding before the first row/column; padding after is implied by OH/OW */
  padTop: number; padLeft: number;
  /** output height and width */
  OH: number; OW: number;
}

export interface Pool2DGeometry {
  N: number; H: number; W: number; C: number;
  KH: number; KW: number;
  strideH: number; strideW: number;
  padTop: number; padLeft: number;
  OH: number; OW: number;
}

export type ActivationKind = 'relu' | 'clippedRelu' | 'tanh' | 'sigmoid' | 'linear' | 'gelu' | 'leakyRelu';

/** clippedRelu's ceiling and leakyRelu's negative slope when the caller gives none. */
export const DEFAULT_RELU_CAP = 20;
export const DEFAULT_LEAKY_SLOPE = 0.01;

/** The activation's parameter (`cap` of the kernels): the given one, else the kind's default. */
export function activationParam(kind: ActivationKind, param?: number): number {
  return param ?? (kind === 'leakyRelu' ? DEFAULT_LEAKY_SLOPE : DEFAULT_RELU_CAP);
}

/**
 * gelu's derivative is not a function of its output (it is not monotonic), so its backward reads
 * the forward INPUT; every other kind's backward reads the forward output.
 */
export function backwardReadsInput(kind: ActivationKind): boolean {
  return kind === 'gelu';
}

export interface AdamParams {
  lr: number; beta1: number; beta2: number; eps: number;
  /** L2 added to the gradient (Adam) or decoupled decay (AdamW), see `decoupled` */
  weightDecay: number;
  decoupled: boolean;
  /** 1-based step count, for bias correction */
  step: number;
}

export interface SgdParams {
  lr: number;
  /** 0 disables momentum (then `velocity` may be null) */
  momentum: number;
  nesterov: boolean;
  weightDecay: number;
}

export interface Backend {
  readonly name: string;

  /** A zeroed array the backend computes on without copies; `shared` asks for SharedArrayBuffer backing. */
  alloc(length: number, shared?: boolean): Float32Array;

  /** C[M×N] = alpha·op(A)·op(B) + beta·C, op(A) is M×K, op(B) is K×N; transA means A is stored K×M. */
  gemm(transA: boolean, transB: boolean, M: number, N: number, K: number,
       alpha: number, A: Float32Array, B: Float32Array, beta: number, C: Float32Array): void;

  /** y[N,OH,OW,F] = conv(x[N,H,W,C], w[KH,KW,C,F]) (+ bias[F] when given). */
  conv2dForward(x: Float32Array, w: Float32Array, bias: Float32Array | null, y: Float32Array, g: Conv2DGeometry): void;
  /** dx[N,H,W,C] = gradient of the convolution w.r.t. its input (overwritten). */
  conv2dBackwardData(dy: Float32Array, w: Float32Array, dx: Float32Array, g: Conv2DGeometry): void;
  /** dw[KH,KW,C,F] += gradient w.r.t. the filter; db[F] += sum of dy when given. */
  conv2dBackwardFilter(x: Float32Array, dy: Float32Array, dw: Float32Array, db: Float32Array | null, g: Conv2DGeometry): void;

  /** Max pool; `argmax[i]` receives the flat input index of output i's maximum. Padding never wins. */
  maxPoolForward(x: Float32Array, y: Float32Array, argmax: Int32Array, g: Pool2DGeometry): void;
  /** dx (overwritten) receives dy routed through argmax. */
  maxPoolBackward(dy: Float32Array, argmax: Int32Array, dx: Float32Array, g: Pool2DGeometry): void;
  /** Average pool; padded cells are excluded from the count (count_include_pad = false). */
  avgPoolForward(x: Float32Array, y: Float32Array, g: Pool2DGeometry): void;
  avgPoolBackward(dy: Float32Array, dx: Float32Array, g: Pool2DGeometry): void;

  /** y[r, c] = x[r, c] + bias[c] over `rows` rows of `cols` columns (y may be x). */
  biasAdd(x: Float32Array, bias: Float32Array, y: Float32Array, rows: number, cols: number): void;
  /** db[c] += Σ_r dy[r, c]. */
  biasGrad(dy: Float32Array, db: Float32Array, rows: number, cols: number): void;

  /**
   * y = f(x) elementwise (y may be x). `cap` is the kind's parameter: clippedRelu's ceiling (default
   * 20), leakyRelu's slope for x < 0 (default 0.01, must be ≥ 0). `gelu` is the exact (erf) form,
   * PyTorch's `approximate='none'`.
   */
  activationForward(kind: ActivationKind, x: Float32Array, y: Float32Array, cap?: number): void;
  /**
   * dx = dy · f'(·), computed from the forward OUTPUT y — except for gelu, where `y` must be the
   * forward INPUT x (see backwardReadsInput); dx may be dy.
   */
  activationBackward(kind: ActivationKind, y: Float32Array, dy: Float32Array, dx: Float32Array, cap?: number): void;

  /**
   * Softmax cross-entropy over `rows` rows of `classes` logits. Returns the SUM of per-row losses;
   * writes dlogits = (softmax − onehot) · gradScale (dlogits may be logits).
   */
  softmaxCrossEntropy(logits: Float32Array, labels: Int32Array, rows: number, classes: number,
                      dlogits: Float32Array, gradScale: number): number;

  /** y += alpha · x */
  axpy(alpha: number, x: Float32Array, y: Float32Array): void;
  /** x *= alpha */
  scale(alpha: number, x: Float32Array): void;

  /** One Adam/AdamW update of `params` in place; m and v are its moment buffers. */
  adamStep(params: Float32Array, grads: Float32Array, m: Float32Array, v: Float32Array, p: AdamParams): void;
  /** One SGD update (with optional (Nesterov) momentum) of `params` in place. */
  sgdStep(params: Float32Array, grads: Float32Array, velocity: Float32Array | null, p: SgdParams): void;
}
