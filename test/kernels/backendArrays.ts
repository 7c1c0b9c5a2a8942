/**
 * Arrays in a backend's memory for the kernel tests that run every backend. A device backend
 * (webgpu) keeps its arrays on the device: what the host writes reaches its kernels only after
 * `fromHost`, its results reach the host only after `toHost`, and a kernel writes only arrays from
 * its `alloc` (src/kernels/deviceStorage.ts, src/kernels/webgpu/residency.ts). The CPU backends
 * have no `device`, so both points cost them nothing.
 */
import type { Backend } from '../../src/kernels/backend.ts';

/** `a` copied into b's memory, where b's kernels see it. */
export function put(b: Backend, a: ArrayLike<number>): Float32Array {
  const out = b.alloc(a.length);
  out.set(a);
  b.device?.fromHost([out]);
  return out;
}

/**
 * int32 values in b's memory. A device backend uploads an int32 array from the host each time a
 * kernel reads it (lengths, row starts), so nothing more is needed there.
 */
export function putInt(b: Backend, a: ArrayLike<number>): Int32Array {
  const f = b.alloc(a.length);
  const out = new Int32Array(f.buffer, f.byteOffset, a.length);
  out.set(a);
  return out;
}

/** Brings b's results into the host copies of `arrays`, after every kernel recorded before. */
export async function toHost(b: Backend, ...arrays: Float32Array[]): Promise<void> {
  await b.device?.toHost(arrays);
}
