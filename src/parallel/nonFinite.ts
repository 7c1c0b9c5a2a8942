/**
 * Finding NaN and ±Inf in flat buffers, cheaply: x − x is 0 for every finite x and NaN otherwise,
 * so one pass of additions says whether a buffer holds any non-finite value (no branch per float).
 */

/**
 * True when every value of `buf` is finite. Four accumulators, so the additions do not wait on
 * each other: a step checks its whole gradient, and one chain ran at a float per add latency.
 */
export function allFinite(buf: Float32Array): boolean {
  let a0 = 0,
    a1 = 0,
    a2 = 0,
    a3 = 0,
    i = 0;
  for (const n4 = buf.length - (buf.length & 3); i < n4; i += 4) {
    const x0 = buf[i]!,
      x1 = buf[i + 1]!,
      x2 = buf[i + 2]!,
      x3 = buf[i + 3]!;
    a0 += x0 - x0;
    a1 += x1 - x1;
    a2 += x2 - x2;
    a3 += x3 - x3;
  }
  for (; i < buf.length; i++) {
    const x = buf[i]!;
    a0 += x - x;
  }
  return a0 + a1 + a2 + a3 === 0;
}

/** Sums the 0/1 flag `bad` over the devices (one float, the strategy's own communicator); true when any was bad. */
export async function anyBad(
  sum: (values: Float32Array) => Promise<void>,
  scratch: Float32Array,
  bad: boolean,
): Promise<boolean> {
  scratch[0] = bad ? 1 : 0;
  await sum(scratch.subarray(0, 1));
  return scratch[0]! > 0;
}
