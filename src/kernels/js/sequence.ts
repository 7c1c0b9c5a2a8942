/** SequenceKernels on the host: plain fills (the reference every backend matches bit for bit). */

/** x[i] = value over all of x. */
export function fill(x: Float32Array, value: number): void {
  x.fill(value);
}

/** Zeroes frames t ≥ lengths[n] of x [N, T, F]. */
export function zeroPadding(x: Float32Array, N: number, T: number, F: number, lengths: Int32Array): void {
  if (x.length < N * T * F || lengths.length < N)
    throw new RangeError(`zeroPadding: [${N}, ${T}, ${F}] but x has ${x.length} values, lengths ${lengths.length}`);
  for (let n = 0; n < N; n++) {
    const len = lengths[n]!;
    if (!(len >= 0 && len <= T)) throw new RangeError(`zeroPadding: sample ${n} has length ${len} of ${T} frames`);
    if (len < T) x.fill(0, (n * T + len) * F, (n + 1) * T * F);
  }
}
