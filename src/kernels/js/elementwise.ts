import { activationParam, type ActivationKind } from '../activation.ts';

export { DEFAULT_RELU_CAP } from '../activation.ts';

/**
 * Φ(x), the standard normal CDF, as ½·erfc(−x/√2) with erfc from a Chebyshev fit (Numerical
 * Recipes' erfcc, fractional error < 1.2e-7 everywhere, so Φ keeps its relative accuracy deep in the
 * lower tail). assembly/elementwise.ts computes the same expression.
 */
export function normalCdf(x: number): number {
  const z = Math.abs(x) * Math.SQRT1_2;
  const t = 1 / (1 + 0.5 * z);
  const erfc =
    t *
    Math.exp(
      -z * z -
        1.26551223 +
        t *
          (1.00002368 +
            t *
              (0.37409196 +
                t *
                  (0.09678418 +
                    t *
                      (-0.18628806 +
                        t *
                          (0.27886807 + t * (-1.13520398 + t * (1.48851587 + t * (-0.82215223 + t * 0.17087277)))))))),
    );
  return x >= 0 ? 1 - 0.5 * erfc : 0.5 * erfc;
}

/** 1/√(2π), for the normal density φ(x) = exp(−x²/2)/√(2π). */
const INV_SQRT_2PI = 0.3989422804014327;

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
export function activationForward(kind: ActivationKind, x: Float32Array, y: Float32Array, param?: number): void {
  const n = x.length,
    cap = activationParam(kind, param);
  if (y.length < n) throw new Error(`activationForward: output has ${y.length} values, input ${n}`);
  // relu and clippedRelu compare rather than call Math.max/min, which would turn -0 into +0 where
  // the wasm kernel passes it through
  switch (kind) {
    case 'relu':
      for (let i = 0; i < n; i++) {
        const v = x[i];
        if (v < 0) y[i] = 0;
        else y[i] = v;
      }
      return;
    case 'clippedRelu':
      for (let i = 0; i < n; i++) {
        const v = x[i];
        if (v < 0) y[i] = 0;
        else if (v > cap) y[i] = cap;
        else y[i] = v;
      }
      return;
    case 'tanh':
      for (let i = 0; i < n; i++) y[i] = Math.tanh(x[i]);
      return;
    case 'sigmoid':
      // exp(-v) overflows to Infinity for very negative v, giving exactly 0: no special case needed.
      for (let i = 0; i < n; i++) y[i] = 1 / (1 + Math.exp(-x[i]));
      return;
    case 'leakyRelu': {
      // the slope as float32, like the wasm kernel's, so both round the same product
      const slope = Math.fround(cap);
      for (let i = 0; i < n; i++) {
        const v = x[i];
        y[i] = v < 0 ? slope * v : v;
      }
      return;
    }
    case 'gelu':
      // x·Φ(x), exact (erf) form
      for (let i = 0; i < n; i++) {
        const v = x[i];
        y[i] = v * normalCdf(v);
      }
      return;
    case 'linear':
      if (y !== x) y.set(x.subarray(0, n));
      return;
    default:
      throw new Error(`activationForward: unknown activation '${String(kind)}'`);
  }
}

/**
 * dx = dy · f'(x), with f' expressed through the forward output y (dx may be dy); for gelu `y` is
 * the forward input x instead (backwardReadsInput).
 */
export function activationBackward(
  kind: ActivationKind,
  y: Float32Array,
  dy: Float32Array,
  dx: Float32Array,
  param?: number,
): void {
  const n = y.length,
    cap = activationParam(kind, param);
  if (dy.length < n || dx.length < n) {
    throw new Error(`activationBackward: y has ${y.length} values, dy ${dy.length}, dx ${dx.length}`);
  }
  switch (kind) {
    case 'relu':
      for (let i = 0; i < n; i++) dx[i] = y[i] > 0 ? dy[i] : 0;
      return;
    case 'clippedRelu':
      // At the ceiling the output is flat, as PyTorch's hardtanh backward treats it.
      for (let i = 0; i < n; i++) {
        const v = y[i];
        dx[i] = v > 0 && v < cap ? dy[i] : 0;
      }
      return;
    case 'tanh':
      for (let i = 0; i < n; i++) {
        const v = y[i];
        dx[i] = dy[i] * (1 - v * v);
      }
      return;
    case 'sigmoid':
      for (let i = 0; i < n; i++) {
        const v = y[i];
        dx[i] = dy[i] * v * (1 - v);
      }
      return;
    case 'leakyRelu': {
      // with slope ≥ 0, y > 0 exactly where x > 0; at 0 the slope applies, as in PyTorch
      const slope = Math.fround(cap);
      for (let i = 0; i < n; i++) dx[i] = y[i] > 0 ? dy[i] : slope * dy[i];
      return;
    }
    case 'gelu':
      // d/dx x·Φ(x) = Φ(x) + x·φ(x), from the INPUT (here in `y`)
      for (let i = 0; i < n; i++) {
        const v = y[i];
        dx[i] = dy[i] * (normalCdf(v) + v * INV_SQRT_2PI * Math.exp(-0.5 * v * v));
      }
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
