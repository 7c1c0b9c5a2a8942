/** The functions build/kernels*.wasm exports (assembly/index.ts), as the backend calls them: addresses and sizes. */

export interface KernelExports {
  heapBase(): number;
  isRelaxed(): number;
  gemmScratchBytes(): number;
  setGemmScratch(ptr: number): void;
  setBlocking(mc: number, kc: number, nc: number): void;
  setConvChunkBytes(bytes: number): void;
  gemm(
    transA: number,
    transB: number,
    M: number,
    N: number,
    K: number,
    alpha: number,
    A: number,
    B: number,
    beta: number,
    C: number,
  ): void;
  gemmStrided(
    transA: number,
    transB: number,
    M: number,
    N: number,
    K: number,
    alpha: number,
    A: number,
    lda: number,
    B: number,
    ldb: number,
    beta: number,
    C: number,
    ldc: number,
  ): void;
  kSlice(K: number): number;
  packedNc(): number;
  packBFull(transB: number, B: number, ldb: number, K: number, N: number, kcb: number, ncb: number, dst: number): void;
  gemmPacked(
    transA: number,
    M: number,
    N: number,
    K: number,
    alpha: number,
    A: number,
    lda: number,
    P: number,
    kcb: number,
    ncb: number,
    beta: number,
    C: number,
    ldc: number,
  ): void;
  lstmCellForward(t: number, N: number, H: number, gates: number, c: number, h: number, lengths: number): void;
  lstmCellBackward(
    t: number,
    N: number,
    H: number,
    gates: number,
    c: number,
    dh: number,
    dc: number,
    dz: number,
    lengths: number,
  ): void;
  gruCellForward(
    t: number,
    N: number,
    H: number,
    gates: number,
    rec: number,
    bhh: number,
    hn: number,
    h: number,
    lengths: number,
  ): void;
  gruCellBackward(
    t: number,
    N: number,
    H: number,
    gates: number,
    hn: number,
    h: number,
    dh: number,
    dzx: number,
    dzh: number,
    lengths: number,
  ): void;
  conv2dForward(
    x: number,
    w: number,
    bias: number,
    y: number,
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
    col: number,
    colBytes: number,
  ): void;
  conv2dBackwardData(
    dy: number,
    w: number,
    dx: number,
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
    col: number,
    colBytes: number,
  ): void;
  conv2dBackwardFilter(
    x: number,
    dy: number,
    dw: number,
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
    col: number,
    colBytes: number,
  ): void;
  maxPoolForward(
    x: number,
    y: number,
    argmax: number,
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
  ): void;
  maxPoolBackward(dy: number, argmax: number, dx: number, outLen: number, inLen: number): void;
  avgPoolForward(
    x: number,
    y: number,
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
  ): void;
  avgPoolBackward(
    dy: number,
    dx: number,
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
  ): void;
  biasAdd(x: number, bias: number, y: number, rows: number, cols: number): void;
  biasGrad(dy: number, db: number, rows: number, cols: number, acc: number): void;
  dropoutBackward(dy: number, mask: number, dx: number, n: number): void;
  copyRows(
    from: number,
    fromStarts: number,
    to: number,
    toStarts: number,
    count: number,
    width: number,
    add: number,
  ): void;
  dropoutForward(
    k0: number,
    k1: number,
    counter: number,
    n: number,
    keep: number,
    scale: number,
    x: number,
    mask: number,
    y: number,
  ): void;
  channelCentredSquares(x: number, mean: number, out: number, rows: number, C: number, acc: number): void;
  batchNormNormalise(
    x: number,
    mean: number,
    invStd: number,
    gamma: number,
    beta: number,
    xhat: number,
    y: number,
    rows: number,
    C: number,
  ): void;
  batchNormGradSums(dy: number, xhat: number, out: number, rows: number, C: number, acc: number): void;
  batchNormInputGrad(
    dy: number,
    xhat: number,
    gamma: number,
    invStd: number,
    sums: number,
    M: number,
    dx: number,
    rows: number,
    C: number,
    acc: number,
  ): void;
  activationForward(kind: number, x: number, y: number, n: number, cap: number): void;
  activationBackward(kind: number, y: number, dy: number, dx: number, n: number, cap: number): void;
  softmaxCrossEntropy(
    logits: number,
    labels: number,
    rows: number,
    classes: number,
    dlogits: number,
    gradScale: number,
  ): number;
  axpy(alpha: number, x: number, y: number, n: number): void;
  scale(alpha: number, x: number, n: number): void;
  adamStep(
    params: number,
    grads: number,
    m: number,
    v: number,
    n: number,
    lr: number,
    beta1: number,
    beta2: number,
    c1: number,
    c2: number,
    eps: number,
    l2: number,
    shrink: number,
    invBc1: number,
    invBc2: number,
    /** 1: v frozen (read, not updated) */
    freezeV: number,
  ): void;
  sgdStep(
    params: number,
    grads: number,
    velocity: number,
    n: number,
    lr: number,
    momentum: number,
    nesterov: number,
    wd: number,
  ): void;
  zeroF32(dst: number, n: number): void;
}
