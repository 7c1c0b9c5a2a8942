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

/** A recurrent cell a backend may run over a whole direction (Backend.recurrentSequenceForward). */
export type SequenceCell = 'lstm' | 'gru';

/** One direction's parameters in PyTorch's layout and gate order: W_ih [G·H, F], W_hh [G·H, H], b_ih, b_hh [G·H]. */
export interface RecurrentWeights {
  wih: Float32Array;
  whh: Float32Array;
  bih: Float32Array;
  bhh: Float32Array;
}
/** Their gradients, the same shapes. */
export interface RecurrentGradients {
  dwih: Float32Array;
  dwhh: Float32Array;
  dbih: Float32Array;
  dbhh: Float32Array;
}

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
  lr: number;
  beta1: number;
  beta2: number;
  eps: number;
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

/**
 * op(B) [K×N] of a gemm prepared once for many products (a recurrent weight is the B of every
 * step). Made by one backend's `packB`, used by the same backend's `gemmPacked` only. It may keep a
 * reference to B instead of a copy (native does): B must not change while the pack is in use.
 */
export interface PackedMatrix {
  /** depth and columns of op(B) */
  readonly K: number;
  readonly N: number;
  /** the backend that made it */
  readonly backend: string;
}

export interface Backend {
  readonly name: string;

  /** A zeroed array the backend computes on without copies; `shared` asks for SharedArrayBuffer backing. */
  alloc(length: number, shared?: boolean): Float32Array;

  /** C[M×N] = alpha·op(A)·op(B) + beta·C, op(A) is M×K, op(B) is K×N; transA means A is stored K×M. */
  gemm(
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
  ): void;

  /**
   * op(B) [K×N] (B stored N×K when transB) prepared for gemmPacked. `into`, a pack of this backend
   * with the same K and N (and transB), is refilled instead of allocating.
   */
  packB(transB: boolean, K: number, N: number, B: Float32Array, into?: PackedMatrix | null): PackedMatrix;
  /**
   * C[M×N] = alpha·op(A)·P + beta·C with P from this backend's packB. A and C start at element
   * `aOffset` / `cOffset` of the arrays given (a step's block of a time-major buffer, without a view).
   */
  gemmPacked(
    transA: boolean,
    M: number,
    N: number,
    K: number,
    alpha: number,
    A: Float32Array,
    P: PackedMatrix,
    beta: number,
    C: Float32Array,
    aOffset?: number,
    cOffset?: number,
  ): void;

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

  /** Max pool; `argmax[i]` receives the flat input index of output i's maximum. Padding never wins. */
  maxPoolForward(x: Float32Array, y: Float32Array, argmax: Int32Array, g: Pool2DGeometry): void;
  /** dx (overwritten) receives dy routed through argmax. */
  maxPoolBackward(dy: Float32Array, argmax: Int32Array, dx: Float32Array, g: Pool2DGeometry): void;
  /** Average pool; padded cells are excluded from the count (count_include_pad = false). */
  avgPoolForward(x: Float32Array, y: Float32Array, g: Pool2DGeometry): void;
  avgPoolBackward(dy: Float32Array, dx: Float32Array, g: Pool2DGeometry): void;

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
   * Batch normalisation's passes over x [rows, C] (channels last), per channel: float64 arithmetic,
   * each result rounded to float32 once, sums over the rows in order, so every backend gives the
   * same bits (src/kernels/js/batchNorm.ts is the definition). Outputs are overwritten.
   * channelCentredSquares: out[c] = Σ_r (x[r, c] − mean[c])².
   */
  channelCentredSquares(x: Float32Array, mean: Float32Array, out: Float32Array, rows: number, C: number): void;
  /** x̂ = (x − mean)·invStd and y = x̂·γ + β (x̂ unrounded in y's sum). */
  batchNormNormalise(
    x: Float32Array,
    mean: Float32Array,
    invStd: Float32Array,
    gamma: Float32Array,
    beta: Float32Array,
    xhat: Float32Array,
    y: Float32Array,
    rows: number,
    C: number,
  ): void;
  /** out[c] = Σ_r dy[r, c] and out[C + c] = Σ_r dy[r, c]·x̂[r, c] (out: 2C). */
  batchNormGradSums(dy: Float32Array, xhat: Float32Array, out: Float32Array, rows: number, C: number): void;
  /** dx = k·(M·dy − Σdy − x̂·Σdy·x̂), k = γ·invStd/M per channel; `sums` as batchNormGradSums wrote them (over M rows). */
  batchNormInputGrad(
    dy: Float32Array,
    xhat: Float32Array,
    gamma: Float32Array,
    invStd: Float32Array,
    sums: Float32Array,
    M: number,
    dx: Float32Array,
    rows: number,
    C: number,
  ): void;

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

  /** y += alpha · x */
  axpy(alpha: number, x: Float32Array, y: Float32Array): void;
  /** x *= alpha */
  scale(alpha: number, x: Float32Array): void;

  // Recurrent cells, one step t of a time-major run of N samples and H units (src/nn/recurrentCell.ts):
  // block t of a [T·N, ·] buffer is step t's N rows; state buffers [(T+1)·N, H] hold the zero initial
  // state in block 0, so step t reads block t and writes block t + 1. A sample n with lengths[n] ≤ t
  // is padding at step t: its new states are 0 and its pre-activation gradients 0. Gate order is
  // PyTorch's (LSTM i, f, g, o; GRU r, z, n).

  /**
   * LSTM forward step: `gates` block t holds the pre-activations z [N, 4H] (both projections and
   * biases) and receives the activations i, f, g, o (what backward reads); c, h block t + 1 receive
   * c' = f⊙c + i⊙g and h' = o⊙tanh(c').
   */
  lstmCellForward(
    t: number,
    N: number,
    H: number,
    gates: Float32Array,
    c: Float32Array,
    h: Float32Array,
    lengths: Int32Array,
  ): void;
  /**
   * LSTM backward step: reads dh block t + 1 (dL/dh') and dc [N, H] (dL/dc' from step t + 1),
   * writes dz block t [N, 4H] (dL/dz) and replaces dc with dL/dc of step t.
   */
  lstmCellBackward(
    t: number,
    N: number,
    H: number,
    gates: Float32Array,
    c: Float32Array,
    dh: Float32Array,
    dc: Float32Array,
    dz: Float32Array,
    lengths: Int32Array,
  ): void;
  /**
   * Optional: one direction of an LSTM or a GRU over all its steps in one call (the onednn
   * backend: oneDNN's LSTM and linear-before-reset GRU primitives), on the time-major run the cells
   * step through: x [T·N, F], the weights in PyTorch's layout and gate order (`RecurrentWeights`),
   * h [T·N, H] the state after each step (the run's blocks 1…T). It knows no lengths: every sample
   * runs all T steps, so the caller zeroes the states at a sample's padding, and its gradients are
   * exact when the padding follows each sample's end and dL/dh is 0 there.
   * `recurrentSequenceWorkspace` is the floats of the workspace the forward fills for the
   * backward, 0 where the backend does not offer this cell and shape (the caller then steps
   * through the cells).
   */
  recurrentSequenceWorkspace?(cell: SequenceCell, N: number, T: number, F: number, H: number): number;
  recurrentSequenceForward?(
    cell: SequenceCell,
    N: number,
    T: number,
    F: number,
    H: number,
    x: Float32Array,
    w: RecurrentWeights,
    h: Float32Array,
    workspace: Float32Array,
  ): void;
  /** After recurrentSequenceForward of the same arrays: dx [T·N, F] written; the gradients `g` += (dh [T·N, H]: dL/dh of each step). */
  recurrentSequenceBackward?(
    cell: SequenceCell,
    N: number,
    T: number,
    F: number,
    H: number,
    x: Float32Array,
    w: RecurrentWeights,
    h: Float32Array,
    workspace: Float32Array,
    dh: Float32Array,
    dx: Float32Array,
    g: RecurrentGradients,
  ): void;
  /**
   * GRU forward step: `gates` block t holds the input projection with b_ih [N, 3H] and receives
   * r, z, n; `rec` [N, 3H] is W_hh·h (no bias), `bhh` [3H]; `hn` block t receives W_hn·h + b_hn;
   * h block t + 1 the new state.
   */
  gruCellForward(
    t: number,
    N: number,
    H: number,
    gates: Float32Array,
    rec: Float32Array,
    bhh: Float32Array,
    hn: Float32Array,
    h: Float32Array,
    lengths: Int32Array,
  ): void;
  /**
   * GRU backward step: reads dh block t + 1, writes dzx and dzh block t [N, 3H] (dL/d of the input
   * and of the recurrent pre-activations) and adds z⊙dh' to dh block t.
   */
  gruCellBackward(
    t: number,
    N: number,
    H: number,
    gates: Float32Array,
    hn: Float32Array,
    h: Float32Array,
    dh: Float32Array,
    dzx: Float32Array,
    dzh: Float32Array,
    lengths: Int32Array,
  ): void;

  /** One Adam/AdamW update of `params` in place; m and v are its moment buffers. */
  adamStep(params: Float32Array, grads: Float32Array, m: Float32Array, v: Float32Array, p: AdamParams): void;
  /** One SGD update (with optional (Nesterov) momentum) of `params` in place. */
  sgdStep(params: Float32Array, grads: Float32Array, velocity: Float32Array | null, p: SgdParams): void;
}
