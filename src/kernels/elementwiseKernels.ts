/** The Backend's per-element and per-row kernels: dropout, row copies, bias, activations, softmax and its cross-entropy. */
import type { ActivationKind } from './activation.ts';

export interface ElementwiseKernels {
  /**
   * Inverted dropout over n elements: draw i is number counter + i of the Philox4x32-10 stream keyed
   * (k0, k1) (src/tensor/rng.ts, CounterRng.at; counter an integer below 2⁵³); mask[i] = scale where
   * the draw is below keep, else 0; y[i] = x[i]·mask[i] in float64, rounded once. Every backend
   * draws the same numbers (src/kernels/js/dropout.ts is the definition).
   */
  dropoutForward(
    k0: number,
    k1: number,
    counter: number,
    n: number,
    keep: number,
    scale: number,
    x: Float32Array,
    mask: Float32Array,
    y: Float32Array,
  ): void;
  /** dx = dy·mask over n elements (dx may be dy). */
  dropoutBackward(dy: Float32Array, mask: Float32Array, dx: Float32Array, n: number): void;

  /**
   * Rows between flat arrays in one call: for i < count, the `width` values from to[toStarts[i]] are
   * set to (with `add`: incremented by) those from from[fromStarts[i]]; a from-start of −1 sets
   * zeros (adds nothing). Rows of `from` and `to` must not overlap; every row is bounds-checked.
   * Gathers, scatters and transposes of rows (the recurrent layer's time-major order).
   */
  copyRows(
    from: Float32Array,
    fromStarts: Int32Array,
    to: Float32Array,
    toStarts: Int32Array,
    count: number,
    width: number,
    add: boolean,
  ): void;

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
  softmaxCrossEntropy(
    logits: Float32Array,
    labels: Int32Array,
    rows: number,
    classes: number,
    dlogits: Float32Array,
    gradScale: number,
  ): number;

  /** y = exp(x − max) / Σ exp(x − max) over each of `rows` rows of `cols` values (y must not be x). */
  softmaxForward(x: Float32Array, y: Float32Array, rows: number, cols: number): void;
  /** dx = y ⊙ (dy − Σ_k dy_k·y_k) over each row, from the forward OUTPUT y (dx must not be dy). */
  softmaxBackward(y: Float32Array, dy: Float32Array, dx: Float32Array, rows: number, cols: number): void;
}
