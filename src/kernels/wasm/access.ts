/** What the wasm kernel groups need from the backend (exports, heap, staging, scratch) and the checks they share. */
import type { Conv2DGeometry } from '../convKernels.ts';
import type { Pool2DGeometry } from '../poolKernels.ts';
import type { WasmArray, WasmHeap } from './heap.ts';
import type { KernelExports } from './kernelExports.ts';

/**
 * A backend's module instance as its kernels see it. Kernels read and write wasm memory directly:
 * an array that lives there is passed by address; any other is staged in a temporary block.
 */
export interface WasmAccess {
  readonly e: KernelExports;
  readonly heap: WasmHeap;
  /** the wasm address of `a` (a staged copy when it lives outside wasm memory; copied back after when `back`) */
  ptr(a: WasmArray, back: boolean): number;
  /** copies staged outputs back and releases staging (call in a finally after the kernel) */
  done(): void;
  /** runs `fn`, then `done()`, also when it throws */
  run<T>(fn: () => T): T;
  /** the scratch block (im2col columns, float64 sums): its address and size in bytes */
  readonly colPtr: number;
  readonly colBytes: number;
  /** grows the scratch block to at least `bytes` */
  ensureCol(bytes: number): void;
}

export function need(what: string, name: string, a: { length: number }, n: number): void {
  if (a.length < n) throw new RangeError(`${what}: ${name} has ${a.length} values, needs ${n}`);
}

export function checkGeometry(what: string, g: Conv2DGeometry | Pool2DGeometry): void {
  for (const [k, v] of Object.entries(g)) {
    if (!Number.isInteger(v) || v < 0)
      throw new RangeError(`${what}: geometry field ${k} must be a non-negative integer, got ${v}`);
  }
  if (g.strideH < 1 || g.strideW < 1) throw new RangeError(`${what}: strides must be ≥ 1`);
}
