/**
 * The optional N-API addon (native/paratrain_native.c, built by `npm run build:native` into
 * build/native/paratrain_native.node, or by a hand-run `node-gyp rebuild` in native/), found and
 * loaded by the platform loader (src/platform/addon.ts).
 *
 * Loading never throws: a missing file, a missing libopenblas.so.0, an ABI mismatch or
 * PARATRAIN_NATIVE=0 all give null, and `nativeUnavailableReason()` says which.
 *
 * OpenBLAS threads: paratrain runs one device per core, so BLAS must stay on the calling thread.
 * The addon calls openblas_set_num_threads(1) when it loads. Debian's default libopenblas0 is the
 * pthread build, which also starts (cores − 1) idle server threads in its library constructor
 * unless OPENBLAS_NUM_THREADS is set when it loads; so the first load sets OPENBLAS_NUM_THREADS=1
 * for the duration of the require and then restores the environment (the constructor has read it
 * by then, and child processes are not affected). From a worker thread `process.env` is a private
 * copy, so this only helps when the main thread loads first — as `train` and `info` do.
 */
import { addonPath, addonUnavailableReason, loadAddon, type AddonSpec } from '../../platform/addon.ts';

export interface BlasInfo {
  /** openblas_get_config(), e.g. 'OpenBLAS 0.3.21 NO_LAPACKE DYNAMIC_ARCH NO_AFFINITY Zen MAX_THREADS=64' */
  config: string;
  /** the CPU kernel set OpenBLAS picked at run time (DYNAMIC_ARCH builds), e.g. 'Zen', 'Haswell' */
  corename: string;
  /** how this OpenBLAS was built to parallelise (the addon still uses one thread) */
  parallel: 'sequential' | 'pthread' | 'openmp' | 'unknown';
  /** BLAS threads in use: 1 */
  threads: number;
}

/** The addon's exports (see native/paratrain_native.c). Sizes are non-negative 32-bit integers. */
export interface NativeAddon {
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
  ): void;
  conv2dForward(
    x: Float32Array,
    w: Float32Array,
    bias: Float32Array | null,
    y: Float32Array,
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
  ): void;
  conv2dBackwardData(
    dy: Float32Array,
    w: Float32Array,
    dx: Float32Array,
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
  ): void;
  conv2dBackwardFilter(
    x: Float32Array,
    dy: Float32Array,
    dw: Float32Array,
    db: Float32Array | null,
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
  ): void;
  /**
   * The pre-packed sgemm of recurrent.c (absent from addons built before it: the backend then
   * falls back to sgemm). packedKernel: 'avx512f' when this CPU runs it, else null (packB and
   * gemmPacked then throw); packedLength: floats of a pack of op(B) [K×N]; packB fills P with
   * op(B); gemmPacked: C[cOffset…] = alpha·op(A[aOffset…])·P + beta·C.
   */
  packedKernel?(): string | null;
  packedLength?(K: number, N: number): number;
  packB?(transB: boolean, K: number, N: number, B: Float32Array, P: Float32Array): void;
  gemmPacked?(
    transA: boolean,
    M: number,
    N: number,
    K: number,
    alpha: number,
    A: Float32Array,
    aOffset: number,
    P: Float32Array,
    beta: number,
    C: Float32Array,
    cOffset: number,
  ): void;
  /** Target bytes of one im2col chunk in this thread (default 1 MiB, minimum 4 KiB). */
  setConvChunkBytes(bytes: number): void;
  /** OpenBLAS's thread count; sets it first when `n` is given (benchmarks only: paratrain wants 1). */
  blasThreads(n?: number): number;
  info(): BlasInfo;
}

const SPEC: AddonSpec = {
  file: 'paratrain_native.node',
  sourceDir: 'native',
  disableEnv: 'PARATRAIN_NATIVE',
  requiredExports: ['sgemm'],
  buildCommand: 'npm run build:native',
  notBuiltReason: 'the addon is not built (needs OpenBLAS: apt-get install libopenblas-dev, then npm run build:native)',
  loadEnv: { OPENBLAS_NUM_THREADS: '1' },
};

/** Absolute path of the addon file that would be loaded, or null when none is built. */
export function nativeAddonPath(): string | null {
  return addonPath(SPEC);
}

/** The addon, or null when it is not built, does not load here, or PARATRAIN_NATIVE=0. Loaded once per thread. */
export function loadNativeAddon(): NativeAddon | null {
  return loadAddon<NativeAddon>(SPEC);
}

/** Why `loadNativeAddon()` returned null (undefined when it loaded or was not tried). */
export function nativeUnavailableReason(): string | undefined {
  return addonUnavailableReason(SPEC);
}
