/**
 * Finds, validates and compiles build/kernels.wasm (plain SIMD128) or build/kernels-relaxed.wasm
 * (relaxed SIMD: fused multiply-add). Both src/kernels/wasm/ and dist/kernels/wasm/ sit three levels
 * below the repository root, so the files are found relative to this module's URL.
 *
 * Relaxed SIMD ships unflagged in V8 ≥ 11.4 (Node ≥ 21); Node 20's V8 11.3 has it behind
 * --experimental-wasm-relaxed-simd, which we set through v8.setFlagsFromString before compiling
 * (it only enables a wasm feature; it changes nothing else). The relaxed module is used only if it
 * validates, instantiates and passes a numeric self-test, else the plain SIMD module is used.
 * PARATRAIN_WASM_RELAXED=0 forces the plain module; =1 fails loudly when relaxed is unusable.
 */
import { readFile } from 'node:fs/promises';
import { setFlagsFromString } from 'node:v8';
import type { KernelExports } from './kernelExports.ts';

/** Pages of the imported memory: 16 MiB to start, up to the wasm32 limit of 4 GiB. */
export const INITIAL_PAGES = 256;
export const MAXIMUM_PAGES = 65536;

export interface LoadedKernels {
  exports: KernelExports;
  memory: WebAssembly.Memory;
  relaxed: boolean;
}

export function wasmFileUrl(name: string): URL {
  return new URL(`../../../build/${name}`, import.meta.url);
}

async function readOrNull(url: URL): Promise<Uint8Array<ArrayBuffer> | null> {
  try {
    const file = await readFile(url);
    const bytes = new Uint8Array(file.byteLength);
    bytes.set(file);
    return bytes;
  } catch {
    return null;
  }
}

function newMemory(): WebAssembly.Memory {
  return new WebAssembly.Memory({ initial: INITIAL_PAGES, maximum: MAXIMUM_PAGES, shared: true });
}

async function instantiate(module: WebAssembly.Module, shared?: WebAssembly.Memory): Promise<LoadedKernels> {
  // another memory (the shm arena) gets the module's static data written at its start again:
  // the same read-only tables every time, in the bytes the arena keeps for them
  const memory = shared ?? newMemory();
  const instance = await WebAssembly.instantiate(module, { env: { memory } });
  const exports = instance.exports as unknown as KernelExports;
  return { exports, memory, relaxed: exports.isRelaxed() === 1 };
}

/** A 5×7×9 gemm in wasm against a float64 loop, so a miscompiled relaxed path is caught at load. */
function selfTest(k: LoadedKernels): boolean {
  const e = k.exports;
  const M = 5,
    N = 7,
    K = 9;
  const base = (e.heapBase() + 15) & ~15;
  const scratch = base + 4096;
  e.setGemmScratch(scratch);
  const f = new Float32Array(k.memory.buffer);
  const a = base / 4,
    b = a + M * K,
    c = b + K * N;
  for (let i = 0; i < M * K; i++) f[a + i] = ((i * 7) % 11) / 11 - 0.5;
  for (let i = 0; i < K * N; i++) f[b + i] = ((i * 5) % 13) / 13 - 0.5;
  e.gemm(0, 0, M, N, K, 1, a * 4, b * 4, 0, c * 4);
  for (let i = 0; i < M; i++)
    for (let j = 0; j < N; j++) {
      let s = 0;
      for (let p = 0; p < K; p++) s += f[a + i * K + p]! * f[b + p * N + j]!;
      if (Math.abs(f[c + i * N + j]! - s) > 1e-5) return false;
    }
  f.fill(0, a, c + M * N);
  return true;
}

/** Compiled modules of this thread, by variant ('best' tries relaxed first; 'simd' is plain SIMD128). */
const compiled = new Map<'best' | 'simd', Promise<{ module: WebAssembly.Module; relaxed: boolean } | null>>();

async function compileBest(variant: 'best' | 'simd'): Promise<{ module: WebAssembly.Module; relaxed: boolean } | null> {
  const want = variant === 'simd' ? '0' : process.env.PARATRAIN_WASM_RELAXED;
  if (want !== '0') {
    const bytes = await readOrNull(wasmFileUrl('kernels-relaxed.wasm'));
    if (bytes) {
      if (!WebAssembly.validate(bytes)) {
        try {
          setFlagsFromString('--experimental-wasm-relaxed-simd');
        } catch {
          /* not this V8 */
        }
      }
      try {
        if (WebAssembly.validate(bytes)) {
          const module = await WebAssembly.compile(bytes);
          if (selfTest(await instantiate(module))) return { module, relaxed: true };
        }
      } catch {
        /* fall back to plain SIMD */
      }
    }
    if (want === '1')
      throw new Error(
        'PARATRAIN_WASM_RELAXED=1 but the relaxed-SIMD kernels are unusable on this Node (or build/kernels-relaxed.wasm is missing)',
      );
  }
  const bytes = await readOrNull(wasmFileUrl('kernels.wasm'));
  if (!bytes || !WebAssembly.validate(bytes)) return null;
  return { module: await WebAssembly.compile(bytes), relaxed: false };
}

/**
 * Compiles once per thread and variant; each call returns a fresh instance with its own memory (or
 * over `memory`, a shared one with room for the static data), or null when unavailable.
 * `relaxed: false` forces the plain SIMD128 module (benchmarks compare both).
 */
export async function loadKernels(
  opts: { relaxed?: boolean; memory?: WebAssembly.Memory } = {},
): Promise<LoadedKernels | null> {
  const variant = opts.relaxed === false ? 'simd' : 'best';
  let pending = compiled.get(variant);
  if (!pending) compiled.set(variant, (pending = compileBest(variant)));
  const result = await pending;
  if (!result) return null;
  return instantiate(result.module, opts.memory);
}
