/**
 * Finds and loads the optional N-API addon (native/paratrain_native.c, built by `npm run build:native`
 * into build/native/paratrain_native.node). Both src/kernels/native/ and dist/kernels/native/ sit
 * three levels below the repository root, so the file is found relative to this module's URL; a
 * hand-run `node-gyp rebuild` in native/ (native/build/Release/) is accepted too.
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
import { createRequire } from 'node:module';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

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
  sgemm(transA: boolean, transB: boolean, M: number, N: number, K: number,
        alpha: number, A: Float32Array, B: Float32Array, beta: number, C: Float32Array): void;
  conv2dForward(x: Float32Array, w: Float32Array, bias: Float32Array | null, y: Float32Array,
                N: number, H: number, W: number, C: number, KH: number, KW: number, F: number,
                sh: number, sw: number, pt: number, pl: number, OH: number, OW: number): void;
  conv2dBackwardData(dy: Float32Array, w: Float32Array, dx: Float32Array,
                     N: number, H: number, W: number, C: number, KH: number, KW: number, F: number,
                     sh: number, sw: number, pt: number, pl: number, OH: number, OW: number): void;
  conv2dBackwardFilter(x: Float32Array, dy: Float32Array, dw: Float32Array, db: Float32Array | null,
                       N: number, H: number, W: number, C: number, KH: number, KW: number, F: number,
                       sh: number, sw: number, pt: number, pl: number, OH: number, OW: number): void;
  /** Target bytes of one im2col chunk in this thread (default 1 MiB, minimum 4 KiB). */
  setConvChunkBytes(bytes: number): void;
  /** OpenBLAS's thread count; sets it first when `n` is given (benchmarks only: paratrain wants 1). */
  blasThreads(n?: number): number;
  info(): BlasInfo;
}

const CANDIDATES = ['../../../build/native/paratrain_native.node', '../../../native/build/Release/paratrain_native.node'];

let loaded: { addon: NativeAddon | null; reason?: string } | undefined;

/** Absolute path of the addon file that would be loaded, or null when none is built. */
export function nativeAddonPath(): string | null {
  for (const rel of CANDIDATES) {
    const path = fileURLToPath(new URL(rel, import.meta.url));
    if (existsSync(path)) return path;
  }
  return null;
}

/** The addon, or null when it is not built, does not load here, or PARATRAIN_NATIVE=0. Loaded once per thread. */
export function loadNativeAddon(): NativeAddon | null {
  if (loaded) return loaded.addon;
  if (process.env.PARATRAIN_NATIVE === '0') {
    loaded = { addon: null, reason: 'disabled by PARATRAIN_NATIVE=0' };
    return null;
  }
  const path = nativeAddonPath();
  if (!path) {
    loaded = { addon: null, reason: 'the addon is not built (needs OpenBLAS: apt-get install libopenblas-dev, then npm run build:native)' };
    return null;
  }
  const setEnv = process.env.OPENBLAS_NUM_THREADS === undefined;
  if (setEnv) process.env.OPENBLAS_NUM_THREADS = '1';
  try {
    const addon = createRequire(import.meta.url)(path) as NativeAddon;
    if (typeof addon.sgemm !== 'function') throw new Error('it does not export sgemm (stale build? run npm run build:native)');
    loaded = { addon };
  } catch (err) {
    loaded = { addon: null, reason: `${path} does not load: ${(err as Error).message.split('\n')[0]}` };
  } finally {
    if (setEnv) delete process.env.OPENBLAS_NUM_THREADS;
  }
  return loaded.addon;
}

/** Why `loadNativeAddon()` returned null (undefined when it loaded or was not tried). */
export function nativeUnavailableReason(): string | undefined {
  return loaded?.reason;
}
