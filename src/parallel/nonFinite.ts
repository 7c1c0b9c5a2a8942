/**
 * Finding NaN and ±Inf in flat buffers, cheaply: x − x is 0 for every finite x and NaN otherwise,
 * so one pass of additions says whether a buffer holds any non-finite value (no branch per float).
 */

/** True when every value of `buf` is finite. */
export function allFinite(buf: Float32Array): boolean {
  let acc = 0;
  for (let i = 0; i < buf.length; i++) {
    const x = buf[i]!;
    acc += x - x;
  }
  return acc === 0;
}

/** Sums the 0/1 flag `bad` over the devices (one float, the strategy's own communicator); true when any was bad. */
export async function anyBad(sum: (values: Float32Array) => Promise<void>, scratch: Float32Array, bad: boolean): Promise<boolean> {
  scratch[0] = bad ? 1 : 0;
  await sum(scratch.subarray(0, 1));
  return scratch[0]! > 0;
}
