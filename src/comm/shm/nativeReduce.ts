/**
 * Finds and loads the shm transport's optional native reduction (native/shm/paratrain_shm.c, built
 * by `npm run build:shm` into build/native/paratrain_shm.node; `npm ci` builds it wherever a C
 * compiler is). The collectives use it for registered buffers (collectives.ts); without it the
 * wasm kernel (reduceKernel.ts) does the same sums in the same order, so the bits are the same.
 *
 * Why: a 2-rank allreduce in cache is bound by its stores, two per result, and wasm's are 16 bytes
 * wide. On a Zen 4, two threads each reducing half of two buffers in place (a scratch C loop) ran
 * 36 / 38 / 12 GB/s at 1 / 4 / 16 MB with 128-bit vectors and 60 / 70 / 11 with AVX2's 256-bit
 * ones. In the collective itself (`npm run bench -- allreduce`, the kernels taking turns call by
 * call) the gain shows at 1 MB (40–51 GB/s against 32–43); from 4 MB the caches' bandwidth bounds
 * both kernels alike. And wasm reaches only its own memory, so registered buffers outside the
 * arena went through scratch copies; the addon reads and writes every rank's buffer where it is
 * (9–13 GB/s against 5–9).
 *
 * Found and loaded by the platform loader (src/platform/addon.ts). Loading never throws: a
 * missing file, an ABI mismatch or PARATRAIN_SHM_NATIVE=0 give null.
 */
import { addonUnavailableReason, loadAddon, type AddonSpec } from '../../platform/addon.ts';

/** The addon's exports. */
export interface ShmNativeAddon {
  /**
   * For i in [start, start + n): the f32 sum of srcs[k][i] in array order, divided by div when
   * div ≠ 0, written to dsts[d][i] for every d. Sources and destinations may be the same arrays.
   */
  reduce(srcs: Float32Array[], dsts: Float32Array[], start: number, n: number, div: number): void;
  /** the instruction set reduce runs with: 'avx2' or 'plain' (portable C) */
  isa(): string;
  /** 'plain' makes reduce run the portable C kernel (for every thread of the process), 'best' the widest the CPU has; returns isa() (for tests) */
  setIsa(name: 'plain' | 'best'): string;
}

const SPEC: AddonSpec = {
  file: 'paratrain_shm.node',
  sourceDir: 'native/shm',
  disableEnv: 'PARATRAIN_SHM_NATIVE',
  requiredExports: ['reduce', 'isa'],
  buildCommand: 'npm run build:shm',
  notBuiltReason: 'the native shm reduction is not built (npm run build:shm)',
};

/** The addon, or null when it is not built, does not load, or PARATRAIN_SHM_NATIVE=0. Loaded once per thread. */
export function loadShmNative(): ShmNativeAddon | null {
  return loadAddon<ShmNativeAddon>(SPEC);
}

/** Why `loadShmNative()` returned null (undefined when it loaded or was not tried). */
export function shmNativeUnavailableReason(): string | undefined {
  return addonUnavailableReason(SPEC);
}

/** One line on which kernel the shm collectives reduce registered buffers with, for `paratrain info` and the benchmarks. */
export function shmReduceDescription(): string {
  const native = loadShmNative();
  return native
    ? `native (native/shm, ${native.isa()}) for registered buffers, wasm SIMD for the rest`
    : `wasm SIMD (${shmNativeUnavailableReason() ?? 'the native reduction did not load'})`;
}
