import type { ActivationKind } from '../backend.ts';

/** clippedRelu's ceiling when the caller gives none (DeepSpeech's value). */
export const DEFAULT_RELU_CAP = 20;

/** y[r, c] = x[r, c] + bias[c] over rows×cols (y may be x). */
export function biasAdd(x: Float32Array, bias: Float32Array, y: Float32Array, rows: number, cols: number): void {
  let o = 0;
  for (let r = 0; r < rows; r++) {
    for (let c = 0; c < cols; c++, o++) y[o] = x[o] + bias[c];
  }
}

/** db[c] += Σ_r dy[r, c]; summed in float64 because rows can be N·OH·OW (tens of thousands). */
export function biasGrad(dy: Float32Array, db: Float32Array, rows: number, cols: number): void {
  const acc = new Float64Array(cols);
  let o = 0;
  for (let r = 0; r < rows; r++) {
    for (let c = 0; c < cols; c++, o++) acc[c] += dy[o];
  }
  for (let c = 0; c < cols; c++) db[c] += acc[c];
}

/** y = f(x) elementwise (y may be x). Written so NaN propagates, as in PyTorch. */
export function activationForward(kind: ActivationKind, x: Float32Array, y: Float32Array, cap = DEFAULT_RELU_CAP): void {
  const n = x.length;
  if (y.length < n) throw new Error(`activationForward: output has ${y.length} values, input ${n}`);
  switch (kind) {
    case 'relu':
      for (let i = 0; i < n; i++) { const v = x[i]; y[i] = v < 0 ? 0 : v; }
      return;
    case 'clippedRelu':
      for (let i = 0; i < n; i++) { const v = x[i]; y[i] = v < 0 ? 0 : v > cap ? cap : v; }
      return;
    case 'tanh':
      for (let i = 0; i < n; i++) y[i] = Math.tanh(x[i]);
      return;
    case 'sigmoid':
      // exp(-v) overflows to Infinity for very negative v, giving exactly 0: no special case needed.
      for (let i = 0; i < n; i++) y[i] = 1 / (1 + Math.exp(-x[i]));
      return;
    case 'linear':
      if (y !== x) y.set(x.subarray(0, n));
      return;
    default:
      throw new Error(`activationForward: unknown activation '${String(kind)}'`);
  }
}

/** dx = dy · f'(x), with f' expressed through the forward output y (dx may be dy). */
export function activationBackward(kind: ActivationKind, y: Float32Array, dy: Float32Array, dx: Float32Array,
                                   cap = DEFAULT_RELU_CAP): void {
  const n = y.length;
  if (dy.length < n || dx.length < n) {
    throw new Error(`activationBackward: y has ${y.length} values, dy ${dy.length}, dx ${dx.length}`);
  }
  switch (kind) {
    case 'relu':
      for (let i = 0; i < n; i++) dx[i] = y[i] > 0 ? dy[i] : 0;
      return;
    case 'clippedRelu':
      // At the ceiling the output is flat, as PyTorch's hardtanh backward treats it.
      for (let i = 0; i < n; i++) { const v = y[i]; dx[i] = v > 0 && v < cap ? dy[i] : 0; }
      return;
    case 'tanh':
      for (let i = 0; i < n; i++) { const v = y[i]; dx[i] = dy[i] * (1 - v * v); }
      return;
    case 'sigmoid':
      for (let i = 0; i < n; i++) { const v = y[i]; dx[i] = dy[i] * v * (1 - v); }
      return;
    case 'linear':
      if (dx !== dy) dx.set(dy.subarray(0, n));
      return;
    default:
      throw new Error(`activationBackward: unknown activation '${String(kind)}'`);
  }
}

/** y += alpha · x */
export function axpy(alpha: number, x: Float32Array, y: Float32Array): void {
  const n = x.length;
  if (y.length < n) throw new Error(`axpy: y has ${y.length} values, x has ${n}`);
  for (let i = 0; i < n; i++) y[i] += alpha * x[i];
}

/** x *= alpha */
export function scale(alpha: number, x: Float32Array): void {
  const n = x.length;
  for (let i = 0; i < n; i++) x[i] *= alpha;
}
