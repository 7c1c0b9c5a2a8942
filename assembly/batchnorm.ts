// Batch normalisation's passes over x [rows, C] (channels last), per channel. The arithmetic is
// float64, two channels to an f64x2, each result rounded to float32 once, in the js backend's order
// (src/kernels/js/batchNorm.ts): bit for bit its results. Sums run over the rows in order, in
// `acc` (float64 scratch, 16-byte aligned: C·8 bytes, 2C·8 for batchNormGradSums).

import { at } from './simd';

/** Two floats at p as an f64x2. */
// @ts-ignore: decorator
@inline function load2(p: usize): v128 {
  return f64x2.promote_low_f32x4(v128.load64_zero(p));
}

/** An f64x2 rounded to two floats at p. */
// @ts-ignore: decorator
@inline function store2(p: usize, v: v128): void {
  v128.store64_lane(p, f32x4.demote_f64x2_zero(v), 0);
}

// @ts-ignore: decorator
@inline function slot(acc: usize, c: i32): usize {
  return acc + (<usize>c << 3);
}

function zeroF64(acc: usize, n: i32): void {
  for (let i = 0; i < n; i++) store<f64>(slot(acc, i), 0);
}

/** out[c] = Σ_r (x[r, c] − mean[c])² (out overwritten). */
export function channelCentredSquares(x: usize, mean: usize, out: usize, rows: i32, C: i32, acc: usize): void {
  const C2 = C & ~1;
  zeroF64(acc, C);
  for (let r = 0; r < rows; r++) {
    const row = at(x, r * C);
    let c = 0;
    for (; c < C2; c += 2) {
      const d = f64x2.sub(load2(at(row, c)), load2(at(mean, c)));
      v128.store(slot(acc, c), f64x2.add(v128.load(slot(acc, c)), f64x2.mul(d, d)));
    }
    if (c < C) {
      const d = <f64>load<f32>(at(row, c)) - <f64>load<f32>(at(mean, c));
      store<f64>(slot(acc, c), load<f64>(slot(acc, c)) + d * d);
    }
  }
  for (let c = 0; c < C; c++) store<f32>(at(out, c), <f32>load<f64>(slot(acc, c)));
}

/** x̂ = (x − mean)·invStd and y = x̂·γ + β per element, x̂ unrounded in y's sum (xhat, y overwritten). */
export function batchNormNormalise(x: usize, mean: usize, invStd: usize, gamma: usize, beta: usize, xhat: usize, y: usize,
                                   rows: i32, C: i32): void {
  const C2 = C & ~1;
  for (let r = 0; r < rows; r++) {
    const o = r * C;
    let c = 0;
    for (; c < C2; c += 2) {
      const h = f64x2.mul(f64x2.sub(load2(at(x, o + c)), load2(at(mean, c))), load2(at(invStd, c)));
      store2(at(xhat, o + c), h);
      store2(at(y, o + c), f64x2.add(f64x2.mul(h, load2(at(gamma, c))), load2(at(beta, c))));
    }
    if (c < C) {
      const h = (<f64>load<f32>(at(x, o + c)) - <f64>load<f32>(at(mean, c))) * <f64>load<f32>(at(invStd, c));
      store<f32>(at(xhat, o + c), <f32>h);
      store<f32>(at(y, o + c), <f32>(h * <f64>load<f32>(at(gamma, c)) + <f64>load<f32>(at(beta, c))));
    }
  }
}

/** out[c] = Σ_r dy[r, c], out[C + c] = Σ_r dy[r, c]·x̂[r, c] (out overwritten). */
export function batchNormGradSums(dy: usize, xhat: usize, out: usize, rows: i32, C: i32, acc: usize): void {
  const C2 = C & ~1, dot = slot(acc, C);
  zeroF64(acc, 2 * C);
  for (let r = 0; r < rows; r++) {
    const o = r * C;
    let c = 0;
    for (; c < C2; c += 2) {
      const g = load2(at(dy, o + c));
      v128.store(slot(acc, c), f64x2.add(v128.load(slot(acc, c)), g));
      v128.store(slot(dot, c), f64x2.add(v128.load(slot(dot, c)), f64x2.mul(g, load2(at(xhat, o + c)))));
    }
    if (c < C) {
      const g = <f64>load<f32>(at(dy, o + c));
      store<f64>(slot(acc, c), load<f64>(slot(acc, c)) + g);
      store<f64>(slot(dot, c), load<f64>(slot(dot, c)) + g * <f64>load<f32>(at(xhat, o + c)));
    }
  }
  for (let c = 0; c < 2 * C; c++) store<f32>(at(out, c), <f32>load<f64>(slot(acc, c)));
}

/**
 * dx = k·(M·dy − Σdy − x̂·Σdy·x̂) per element, k = γ·invStd/M per channel; `sums` as
 * batchNormGradSums wrote them, M the rows normalised together (dx overwritten). `acc` holds k.
 */
export function batchNormInputGrad(dy: usize, xhat: usize, gamma: usize, invStd: usize, sums: usize, M: f64, dx: usize,
                                   rows: i32, C: i32, acc: usize): void {
  const C2 = C & ~1;
  for (let c = 0; c < C; c++) store<f64>(slot(acc, c), <f64>load<f32>(at(gamma, c)) * <f64>load<f32>(at(invStd, c)) / M);
  const m = f64x2.splat(M);
  for (let r = 0; r < rows; r++) {
    const o = r * C;
    let c = 0;
    for (; c < C2; c += 2) {
      const t = f64x2.sub(f64x2.sub(f64x2.mul(m, load2(at(dy, o + c))), load2(at(sums, c))),
        f64x2.mul(load2(at(xhat, o + c)), load2(at(sums, C + c))));
      store2(at(dx, o + c), f64x2.mul(v128.load(slot(acc, c)), t));
    }
    if (c < C) {
      const t = M * <f64>load<f32>(at(dy, o + c)) - <f64>load<f32>(at(sums, c)) - <f64>load<f32>(at(xhat, o + c)) * <f64>load<f32>(at(sums, C + c));
      store<f32>(at(dx, o + c), <f32>(load<f64>(slot(acc, c)) * t));
    }
  }
}
