/** A zeroed Float32Array; with `shared`, backed by a SharedArrayBuffer so worker threads can read it in place. */
export function alloc(length: number, shared = false): Float32Array {
  if (!Number.isInteger(length) || length < 0)
    throw new Error(`alloc: length must be a non-negative integer, got ${length}`);
  return shared
    ? new Float32Array(new SharedArrayBuffer(length * Float32Array.BYTES_PER_ELEMENT))
    : new Float32Array(length);
}
