/**
 * The `wasm` backend: AssemblyScript SIMD128 kernels (assembly/ → build/kernels*.wasm).
 *
 * Each backend owns one module instance and one shared WebAssembly.Memory (so every array from
 * `alloc` is SharedArrayBuffer-backed and stays valid when the memory grows). Kernels read and
 * write wasm memory directly: arrays from `alloc` are used in place; any other array (a dataset
 * batch, a plain Float32Array) is copied into temporary wasm blocks and, for outputs, copied back.
 * Arrays are never freed unless `free` is called. One backend per thread: instances share nothing.
 */
import type { Backend } from '../backend.ts';
import type { HeapSource, WasmArray } from './heap.ts';
import { loadKernels, type LoadedKernels } from './loader.ts';
import { WasmStaging } from './staging.ts';
import { wasmMatrixKernels } from './gemm.ts';
import { wasmConvolutionKernels } from './conv.ts';
import { wasmPoolingKernels } from './pool.ts';
import { wasmElementwiseKernels } from './elementwise.ts';
import { wasmBatchNormKernels } from './batchNorm.ts';
import { wasmRecurrentKernels } from './recurrent.ts';
import { wasmOptimizerKernels } from './optimizer.ts';
import { layerNormBackward, layerNormForward } from '../js/layerNorm.ts';
import { attentionKernels } from '../js/attention.ts';
import { fill, zeroPadding } from '../js/sequence.ts';

export interface WasmBackend extends Backend {
  /** True when the relaxed-SIMD (fused multiply-add) build is in use. */
  readonly relaxed: boolean;
  /** This backend's memory (shared). */
  readonly memory: WebAssembly.Memory;
  /** A zeroed Int32Array in wasm memory (e.g. max-pool argmax, labels), used without copies. */
  allocInt32(length: number): Int32Array;
  /** Give back an array from `alloc`/`allocInt32` for reuse by a later allocation of the same size. */
  free(a: WasmArray): void;
  /** True when `a` lives in this backend's memory (kernels then use it without copying). */
  owns(a: WasmArray): boolean;
  /** Tuning hooks for benchmarks: gemm blocking and the im2col chunk size in bytes. */
  tune(opts: { mc?: number; kc?: number; nc?: number; convChunkBytes?: number }): void;
}

/** The backend over a loaded module: its memory calls, then each kernel group (one file each) on the same staging. */
function composeWasmBackend(loaded: LoadedKernels, source?: HeapSource): WasmBackend {
  const k = new WasmStaging(loaded.exports, loaded.memory, source);
  const heap = k.heap;
  const matrix = wasmMatrixKernels(k);
  return {
    name: 'wasm',
    relaxed: loaded.relaxed,
    memory: loaded.memory,
    alloc: (length) => heap.allocF32(length),
    allocInt32: (length) => heap.allocI32(length),
    free: (a) => heap.free(a),
    owns: (a) => heap.owns(a),
    tune: (opts) => k.tune(opts),
    ...matrix,
    ...wasmConvolutionKernels(k),
    ...wasmPoolingKernels(k),
    ...wasmElementwiseKernels(k),
    ...wasmBatchNormKernels(k),
    ...wasmRecurrentKernels(k),
    ...wasmOptimizerKernels(k),
    // no SIMD build of these yet: the js kernels read and write wasm memory's views in place
    layerNormForward,
    layerNormBackward,
    // the products in wasm's SIMD gemm, the softmax rows in place on the heap's views
    ...attentionKernels(matrix.gemm),
    // plain fills over the heap's arrays: the host's own loops are already memset speed
    fill,
    zeroPadding,
  };
}

/** This thread's shared heap for backends built without one (see `useSharedHeap`). */
let threadHeap: HeapSource | undefined;

/**
 * Makes every wasm-based backend this thread builds afterwards (wasm, and native and onednn, which
 * allocate through wasm) keep its memory in `source`: a device thread of a shm world passes its
 * communicator's `heapSource()`, so its flat buffers live in the world's arena and peers reduce
 * them in place. Call it before the thread's first `getBackend`.
 */
export function useSharedHeap(source: HeapSource): void {
  threadHeap = source;
}

/**
 * A new wasm backend (its own module instance and shared memory — or `heap`'s memory, by default
 * the thread's `useSharedHeap` one), or null when build/kernels.wasm is missing or this runtime lacks WebAssembly SIMD. The relaxed-SIMD build is preferred when it
 * works here; `{ relaxed: false }` (or PARATRAIN_WASM_RELAXED=0) forces the plain SIMD128 build.
 */
export async function createWasmBackend(
  opts: { relaxed?: boolean; heap?: HeapSource } = {},
): Promise<WasmBackend | null> {
  const source = opts.heap ?? threadHeap;
  let loaded: LoadedKernels | null;
  try {
    loaded = await loadKernels({ relaxed: opts.relaxed, memory: source?.memory });
  } catch (err) {
    if (process.env.PARATRAIN_WASM_RELAXED === '1') throw err;
    return null;
  }
  if (!loaded) return null;
  return composeWasmBackend(loaded, source);
}

export type { WasmArray, HeapSource };
