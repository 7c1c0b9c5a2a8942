// Vector transcendental functions on f32x4 for the recurrent cells (σ, tanh), Cephes' single-precision
// approximations: a few ulp from the float64 Math.exp/Math.tanh the js backend uses, NaN in → NaN out.
// The clamps use pmax/pmin (one maxps/minps on x64) with x as the FIRST operand: pmax(a, b) is
// a < b ? b : a, so a NaN x is kept, never clamped away.

import { madd } from './simd';

/** e^x, x clamped to [−87, 88] (so 2^n stays a normal float): Cephes expf, range reduction by ln 2. */
// @ts-ignore: decorator
@inline export function vexp(x: v128): v128 {
  x = f32x4.pmin(f32x4.pmax(x, f32x4.splat(-87.0)), f32x4.splat(88.0));
  const fx = f32x4.nearest(f32x4.mul(x, f32x4.splat(1.44269504088896341)));
  // x − n·ln 2 in two parts (C1 exact in few bits), so r keeps its precision
  let r = f32x4.sub(x, f32x4.mul(fx, f32x4.splat(0.693359375)));
  r = f32x4.sub(r, f32x4.mul(fx, f32x4.splat(-2.12194440e-4)));
  let p = f32x4.splat(1.9875691500e-4);
  p = madd(p, r, f32x4.splat(1.3981999507e-3));
  p = madd(p, r, f32x4.splat(8.3334519073e-3));
  p = madd(p, r, f32x4.splat(4.1665795894e-2));
  p = madd(p, r, f32x4.splat(1.6666665459e-1));
  p = madd(p, r, f32x4.splat(5.0000001201e-1));
  p = f32x4.add(madd(p, f32x4.mul(r, r), r), f32x4.splat(1));
  const pow2 = i32x4.shl(i32x4.add(i32x4.trunc_sat_f32x4_s(fx), i32x4.splat(127)), 23);
  return f32x4.mul(p, pow2);
}

/** σ(x) = 1 / (1 + e^−x) */
// @ts-ignore: decorator
@inline export function vsigmoid(x: v128): v128 {
  return f32x4.div(f32x4.splat(1), f32x4.add(f32x4.splat(1), vexp(f32x4.neg(x))));
}

/**
 * tanh(x): Cephes tanhf. |x| < 0.625: x + x³·P(x²) (no cancellation near 0); else
 * 1 − 2/(e^{2|x|} + 1) with x's sign. Both are computed and the lane picks one.
 */
// @ts-ignore: decorator
@inline export function vtanh(x: v128): v128 {
  const ax = f32x4.abs(x);
  const z = f32x4.mul(x, x);
  let p = f32x4.splat(-5.70498872745e-3);
  p = madd(p, z, f32x4.splat(2.06390887954e-2));
  p = madd(p, z, f32x4.splat(-5.37397155531e-2));
  p = madd(p, z, f32x4.splat(1.33314422036e-1));
  p = madd(p, z, f32x4.splat(-3.33332819422e-1));
  const small = madd(f32x4.mul(p, z), x, x);
  const e = vexp(f32x4.add(ax, ax));
  const big = f32x4.sub(f32x4.splat(1), f32x4.div(f32x4.splat(2), f32x4.add(e, f32x4.splat(1))));
  // copy x's sign onto big (NaN stays NaN)
  const signed = v128.or(v128.and(x, i32x4.splat(0x80000000)), big);
  return v128.bitselect(small, signed, f32x4.lt(ax, f32x4.splat(0.625)));
}
