/**
 * The optional onednn addon (native/onednn/*.c, built by `npm run build:onednn` into
 * build/native/paratrain_onednn.node), found and loaded by the platform loader
 * (src/platform/addon.ts).
 *
 * Loading never throws: a missing file, a missing libdnnl.so.2, an ABI mismatch or
 * PARATRAIN_ONEDNN=0 all give null, and `onednnUnavailableReason()` says which.
 *
 * Threads: Debian's libdnnl runs on OpenMP; the addon sets the calling thread's OpenMP thread count
 * to 1 before its first oneDNN call on that thread (OpenMP keeps that setting per thread), so each
 * device thread runs oneDNN alone on its core and no OpenMP pool is started. OMP_NUM_THREADS=1 is
 * also set for the duration of the first load, so the library's own start-up sees one thread.
 */
import { addonPath, addonUnavailableReason, loadAddon, type AddonSpec } from '../../platform/addon.ts';

export interface OneDnnInfo {
  /** oneDNN's version, e.g. '2.6.3' */
  version: string;
  /** the instruction set oneDNN dispatches its kernels to on this CPU, e.g. 'avx512_core_bf16', 'avx2' */
  isa: string;
  /** oneDNN's CPU threading runtime: 'openmp' (Debian's) or 'sequential' */
  runtime: string;
  /** oneDNN threads per calling thread: 1 */
  threads: number;
}

/**
 * Per kind of cached plan: plans made in this thread, calls oneDNN had no primitive for, calls the
 * addon's own kernels ran instead of a primitive (native/onednn/direct.c), the last implementation chosen.
 */
export interface OneDnnKindStats {
  plans: number;
  unsupported: number;
  direct: number;
  impl: string;
}

export type OneDnnStats = Record<
  | 'matmul'
  | 'convForward'
  | 'convBackwardData'
  | 'convBackwardWeights'
  | 'maxPoolForward'
  | 'avgPoolForward'
  | 'avgPoolBackward'
  | 'eltwiseForward'
  | 'eltwiseBackward'
  | 'biasAdd'
  | 'logSoftmax'
  | 'maxPoolBackward'
  | 'lstmForward'
  | 'lstmBackward'
  | 'gruForward'
  | 'gruBackward'
  | 'attention',
  OneDnnKindStats
> & { cached: number };

type Geometry13 = [
  N: number,
  H: number,
  W: number,
  C: number,
  KH: number,
  KW: number,
  F: number,
  sh: number,
  sw: number,
  pt: number,
  pl: number,
  OH: number,
  OW: number,
];
type Geometry12 = [
  N: number,
  H: number,
  W: number,
  C: number,
  KH: number,
  KW: number,
  sh: number,
  sw: number,
  pt: number,
  pl: number,
  OH: number,
  OW: number,
];

/**
 * The addon's exports (see native/onednn/paratrain_onednn.c). Each kernel returns true when it ran
 * and false when oneDNN has no primitive for the call (the backend then runs its base kernel).
 */
export interface OneDnnAddon {
  sgemm(
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
  ): boolean;
  /** `act`: the activation applied in the same pass (0 relu, 1 clippedRelu to [0, cap], 4 none). */
  conv2dForward(
    x: Float32Array,
    w: Float32Array,
    bias: Float32Array | null,
    y: Float32Array,
    ...g: [...Geometry13, act: number, cap: number]
  ): boolean;
  /** The pool's output and argmax of conv → activation → max pool without writing the convolution's output (false: not fused). */
  convPoolForward(
    x: Float32Array,
    w: Float32Array,
    bias: Float32Array | null,
    y: Float32Array,
    argmax: Int32Array,
    ...g: [...Geometry13, ...Geometry12, act: number, cap: number]
  ): boolean;
  /** dw, db += the filter gradients from the pooled gradient scattered through argmax, through the activation's backward on yPool when given (false: not fused). */
  conv2dBackwardFilterPooled(
    x: Float32Array,
    dyPool: Float32Array,
    argmax: Int32Array,
    dw: Float32Array,
    db: Float32Array | null,
    ...g: [...Geometry13, ...Geometry12, act: number, yPool: Float32Array | null, cap: number]
  ): boolean;
  conv2dBackwardData(dy: Float32Array, w: Float32Array, dx: Float32Array, ...g: Geometry13): boolean;
  conv2dBackwardFilter(
    x: Float32Array,
    dy: Float32Array,
    dw: Float32Array,
    db: Float32Array | null,
    ...g: Geometry13
  ): boolean;
  maxPoolForward(x: Float32Array, y: Float32Array, argmax: Int32Array, ...g: Geometry12): boolean;
  maxPoolBackward(dy: Float32Array, argmax: Int32Array, dx: Float32Array, ...g: Geometry12): boolean;
  avgPoolForward(x: Float32Array, y: Float32Array, ...g: Geometry12): boolean;
  avgPoolBackward(dy: Float32Array, dx: Float32Array, ...g: Geometry12): boolean;
  /** kind: 0 relu, 1 clippedRelu, 2 tanh, 3 sigmoid, 4 linear */
  activationForward(kind: number, x: Float32Array, y: Float32Array, cap: number): boolean;
  activationBackward(kind: number, y: Float32Array, dy: Float32Array, dx: Float32Array, cap: number): boolean;
  biasAdd(x: Float32Array, bias: Float32Array, y: Float32Array, rows: number, cols: number): boolean;
  biasGrad(dy: Float32Array, db: Float32Array, rows: number, cols: number): boolean;
  /** The LSTM cell's step t (Backend.lstmCellForward); false: no AVX2 and FMA here, the base's cells run. */
  lstmCellForward(
    t: number,
    N: number,
    H: number,
    gates: Float32Array,
    c: Float32Array,
    h: Float32Array,
    lengths: Int32Array,
  ): boolean;
  /** Back through the LSTM cell's step t (Backend.lstmCellBackward); false as above. */
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
  ): boolean;
  /**
   * Floats of the workspace of oneDNN's primitive for one direction of this cell (0 LSTM, 1 GRU) and
   * shape (native/onednn/rnn.c); 0: not offered here.
   */
  rnnWorkspaceSize(cell: number, N: number, T: number, F: number, H: number): number;
  /** Backend.recurrentSequenceForward (false: not offered for this shape). */
  rnnForward(
    cell: number,
    N: number,
    T: number,
    F: number,
    H: number,
    x: Float32Array,
    wih: Float32Array,
    whh: Float32Array,
    bih: Float32Array,
    bhh: Float32Array,
    h: Float32Array,
    workspace: Float32Array,
  ): boolean;
  /** Backend.recurrentSequenceBackward (false as above). */
  rnnBackward(
    cell: number,
    N: number,
    T: number,
    F: number,
    H: number,
    x: Float32Array,
    wih: Float32Array,
    whh: Float32Array,
    bih: Float32Array,
    bhh: Float32Array,
    h: Float32Array,
    workspace: Float32Array,
    dh: Float32Array,
    dx: Float32Array,
    dwih: Float32Array,
    dwhh: Float32Array,
    dbih: Float32Array,
    dbhh: Float32Array,
  ): boolean;
  /** Backend.channelCentredSquares and the batch-norm passes below, in C with AVX-512 (native/onednn/batchnorm.c); false without it (the base's run). */
  channelCentredSquares(x: Float32Array, mean: Float32Array, out: Float32Array, rows: number, C: number): boolean;
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
  ): boolean;
  batchNormGradSums(dy: Float32Array, xhat: Float32Array, out: Float32Array, rows: number, C: number): boolean;
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
  ): boolean;
  /** Backend.dropoutForward in C with AVX-512, the same draws (native/onednn/dropout.c); false without it (the base's runs). */
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
  ): boolean;
  /** The summed loss, or null when oneDNN has no softmax for the shape. */
  softmaxCrossEntropy(
    logits: Float32Array,
    labels: Int32Array,
    rows: number,
    classes: number,
    dlogits: Float32Array,
    gradScale: number,
  ): number | null;
  /** Floats of B [K×N] in the layout of the matmul of products of this shape (0: oneDNN has none). */
  packedWeightsSize(transA: boolean, transB: boolean, M: number, N: number, K: number): number;
  /** B into that layout (false: none). */
  packWeights(
    transA: boolean,
    transB: boolean,
    M: number,
    N: number,
    K: number,
    B: Float32Array,
    packed: Float32Array,
  ): boolean;
  /** C = alpha·op(A)·B + beta·C with B packed by packWeights for this shape (false: not done, multiply by plain B). */
  gemmPackedWeights(
    transA: boolean,
    transB: boolean,
    M: number,
    N: number,
    K: number,
    alpha: number,
    A: Float32Array,
    packed: Float32Array,
    beta: number,
    C: Float32Array,
  ): boolean;
  /**
   * The attention kernels (src/kernels/attentionKernels.ts) with their per-head products as batched
   * matmul primitives and the softmax rows in C (native/onednn/attention.c); false when oneDNN has
   * no matmul for a product (nothing is left half-done that the js kernels would read).
   */
  attentionWeights(
    q: Float32Array,
    k: Float32Array,
    lengths: Int32Array | null,
    probs: Float32Array,
    N: number,
    heads: number,
    T: number,
    headDim: number,
    causal: boolean,
  ): boolean;
  attentionApply(
    probs: Float32Array,
    v: Float32Array,
    out: Float32Array,
    N: number,
    heads: number,
    T: number,
    headDim: number,
  ): boolean;
  attentionApplyBackward(
    probs: Float32Array,
    v: Float32Array,
    dout: Float32Array,
    dprobs: Float32Array,
    dv: Float32Array,
    N: number,
    heads: number,
    T: number,
    headDim: number,
  ): boolean;
  attentionWeightsBackward(
    q: Float32Array,
    k: Float32Array,
    probs: Float32Array,
    dprobs: Float32Array,
    dq: Float32Array,
    dk: Float32Array,
    N: number,
    heads: number,
    T: number,
    headDim: number,
  ): boolean;
  /** Backend.copyRows, a memcpy a row (native/onednn/rows.c); true, or throws on a row out of bounds. */
  copyRows(
    from: Float32Array,
    fromStarts: Int32Array,
    to: Float32Array,
    toStarts: Int32Array,
    count: number,
    width: number,
    add: boolean,
  ): boolean;
  /** Which oneDNN entry point gemm uses in this thread (default the matmul primitive); returns the previous one. */
  setGemm(mode: 'matmul' | 'sgemm'): 'matmul' | 'sgemm';
  /** Whether the addon's own kernels (direct.c) take the shapes they are for in this thread (default on); returns the previous setting. */
  setDirect(on: boolean): boolean;
  info(): OneDnnInfo;
  stats(): OneDnnStats;
}

const SPEC: AddonSpec = {
  file: 'paratrain_onednn.node',
  sourceDir: 'native/onednn',
  disableEnv: 'PARATRAIN_ONEDNN',
  requiredExports: [
    'sgemm',
    'conv2dForward',
    'softmaxCrossEntropy',
    'stats',
    'rnnForward',
    'batchNormNormalise',
    'dropoutForward',
    'attentionWeights',
  ],
  buildCommand: 'npm run build:onednn',
  notBuiltReason: 'the addon is not built (needs oneDNN 2.x: apt-get install libdnnl-dev, then npm run build:onednn)',
  loadFailureReason: (path, message) =>
    /libdnnl/.test(message)
      ? `${path} does not load: ${message} (apt-get install libdnnl2, or rebuild with npm run build:onednn)`
      : `${path} does not load: ${message}`,
  loadEnv: { OMP_NUM_THREADS: '1' },
};

/** Absolute path of the addon file that would be loaded, or null when none is built. */
export function onednnAddonPath(): string | null {
  return addonPath(SPEC);
}

/** The addon, or null when it is not built, does not load here, or PARATRAIN_ONEDNN=0. Loaded once per thread. */
export function loadOneDnnAddon(): OneDnnAddon | null {
  return loadAddon<OneDnnAddon>(SPEC);
}

/** Why `loadOneDnnAddon()` returned null (undefined when it loaded or was not tried). */
export function onednnUnavailableReason(): string | undefined {
  return addonUnavailableReason(SPEC);
}
