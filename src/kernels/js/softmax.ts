/**
 * Backend.softmaxForward and softmaxBackward: softmax over each row, in float64 with the row's
 * maximum subtracted so that exp never overflows (the softmax layer's passes).
 */

/** y = exp(x − max) / Σ exp(x − max) over each of `rows` rows of `cols` values. */
export function softmaxForward(x: Float32Array, y: Float32Array, rows: number, cols: number): void {
  checkRowsOf('softmaxForward', rows, cols, x, y);
  for (let base = 0; base < rows * cols; base += cols) {
    let max = -Infinity;
    for (let k = 0; k < cols; k++) if (x[base + k]! > max) max = x[base + k]!;
    let sum = 0;
    for (let k = 0; k < cols; k++) sum += Math.exp(x[base + k]! - max);
    const inv = 1 / sum;
    for (let k = 0; k < cols; k++) y[base + k] = Math.exp(x[base + k]! - max) * inv;
  }
}

/** dx = y ⊙ (dy − Σ_k dy_k·y_k) over each row, from the forward OUTPUT y (dx must not be dy). */
export function softmaxBackward(y: Float32Array, dy: Float32Array, dx: Float32Array, rows: number, cols: number): void {
  checkRowsOf('softmaxBackward', rows, cols, y, dy, dx);
  for (let base = 0; base < rows * cols; base += cols) {
    let dot = 0;
    for (let k = 0; k < cols; k++) dot += dy[base + k]! * y[base + k]!;
    for (let k = 0; k < cols; k++) dx[base + k] = y[base + k]! * (dy[base + k]! - dot);
  }
}

/** Throws unless every array holds rows × cols values. */
export function checkRowsOf(fn: string, rows: number, cols: number, ...arrays: { length: number }[]): void {
  if (!Number.isInteger(rows) || rows < 0 || !Number.isInteger(cols) || cols < 1)
    throw new RangeError(`${fn}: rows must be a non-negative integer and cols a positive one, got ${rows} and ${cols}`);
  for (const a of arrays)
    if (a.length < rows * cols)
      throw new RangeError(`${fn}: ${rows}×${cols} values, but an array holds only ${a.length}`);
}
