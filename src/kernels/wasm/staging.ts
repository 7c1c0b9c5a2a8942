/** A wasm backend's hold on its module: the heap, arrays staged in and out of it, the kernels' scratch. */
import type { WasmAccess } from './access.ts';
import { WasmHeap, type HeapSource, type WasmArray } from './heap.ts';
import type { KernelExports } from './kernelExports.ts';

/** Minimum im2col scratch; conv chunks aim at 256 KiB (see assembly/conv.ts). */
const MIN_COL_BYTES = 1 << 20;

interface Staged {
  arr: WasmArray;
  ptr: number;
  bytes: number;
  back: boolean;
}

export class WasmStaging implements WasmAccess {
  readonly e: KernelExports;
  readonly heap: WasmHeap;
  colPtr = 0;
  colBytes = 0;
  private readonly staged: Staged[] = [];

  constructor(e: KernelExports, memory: WebAssembly.Memory, source?: HeapSource) {
    this.e = e;
    this.heap = new WasmHeap(memory, e.heapBase(), source);
    e.setGemmScratch(this.heap.allocBytes(e.gemmScratchBytes()));
    this.ensureCol(MIN_COL_BYTES);
  }

  /** Tuning hooks for benchmarks: gemm blocking and the im2col chunk size in bytes. */
  tune(opts: { mc?: number; kc?: number; nc?: number; convChunkBytes?: number }): void {
    if (opts.mc !== undefined || opts.kc !== undefined || opts.nc !== undefined) {
      this.e.setBlocking(opts.mc ?? 128, opts.kc ?? 384, opts.nc ?? 1024);
    }
    if (opts.convChunkBytes !== undefined) {
      this.e.setConvChunkBytes(opts.convChunkBytes);
      this.ensureCol(opts.convChunkBytes * 2);
    }
  }

  ensureCol(bytes: number): void {
    if (bytes <= this.colBytes) return;
    if (this.colBytes > 0) this.heap.freeBytes(this.colPtr, this.colBytes);
    this.colBytes = Math.max(bytes, MIN_COL_BYTES);
    this.colPtr = this.heap.allocBytes(this.colBytes);
  }

  /** Wasm address of `a`: itself when it lives in wasm memory, else a staged copy (copied back after when `back`). */
  ptr(a: WasmArray, back: boolean): number {
    if (this.heap.owns(a)) return a.byteOffset;
    for (const s of this.staged) {
      if (s.arr === a) {
        s.back ||= back;
        return s.ptr;
      }
    }
    const bytes = a.length * 4;
    const ptr = this.heap.allocBytes(bytes);
    const view = a instanceof Int32Array ? this.heap.i32(ptr, a.length) : this.heap.f32(ptr, a.length);
    view.set(a as never);
    this.staged.push({ arr: a, ptr, bytes, back });
    return ptr;
  }

  /** Copies staged outputs back and releases the staging blocks. */
  done(): void {
    if (this.staged.length === 0) return;
    for (const s of this.staged) {
      if (s.back) {
        const view =
          s.arr instanceof Int32Array ? this.heap.i32(s.ptr, s.arr.length) : this.heap.f32(s.ptr, s.arr.length);
        s.arr.set(view as never);
      }
      this.heap.freeBytes(s.ptr, s.bytes);
    }
    this.staged.length = 0;
  }

  /** Runs `fn`, always releasing staging (also when it throws). */
  run<T>(fn: () => T): T {
    try {
      return fn();
    } finally {
      this.done();
    }
  }
}
