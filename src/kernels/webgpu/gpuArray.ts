/**
 * Storage on a GPU: `length` floats from element `offset` of a buffer. Several arrays may view one
 * buffer (a model's parameters in one flat allocation), as host Float32Arrays view one ArrayBuffer.
 */
export interface GpuArray {
  readonly buffer: GPUBuffer;
  /** in elements (f32) */
  readonly offset: number;
  readonly length: number;
}

/** The view of `length` elements from element `start` of `a`. */
export function gpuView(a: GpuArray, start: number, length: number): GpuArray {
  if (start < 0 || length < 0 || start + length > a.length)
    throw new RangeError(`view [${start}, ${start + length}) outside an array of ${a.length}`);
  return { buffer: a.buffer, offset: a.offset + start, length };
}

/**
 * Refuses arrays too short for a kernel call before anything is recorded: each `[name, array,
 * floats needed]` (a null array is absent, an optional bias), `shape` saying what the call is of.
 */
export function checkLengths(what: string, shape: string, arrays: [string, GpuArray | null, number][]): void {
  for (const [name, a, want] of arrays)
    if (a && a.length < want) throw new RangeError(`${what}: ${name} has ${a.length} floats, ${shape} needs ${want}`);
}
