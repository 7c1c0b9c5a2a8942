// Vector transcendental functions on f32x4 for the recurrent cells (σ, tanh) and gelu (Φ), Cephes' single-precision
// approximations: a few ulp from the float64 Math.exp/Math.tanh the js backend uses, NaN in → NaN out.
// The clamps use pmax/pmin (one maxps/minps on x64) with x as the FIRST operand: pmax(a, b) is
// a < b ? b : a, so a NaN x is kept, never clamped away.

import { madd } from './simd';

/** e^r · 2^fx, for r what the reduction by ln 2 left of x = fx·ln 2 + r: Cephes expf's polynomial, 2^fx in the exponent bits. */
// @ts-ignore: decorator
@inline function vexpReduced(fx: v128, r: v128): v128 {
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

/** e^x, x clamped to [−87, 88] (so 2^n stays a normal float): Cephes expf, range reduction by ln 2. */
// @ts-ignore: decorator
@inline export function vexp(x: v128): v128 {
  x = f32x4.pmin(f32x4.pmax(x, f32x4.splat(-87.0)), f32x4.splat(88.0));
  const fx = f32x4.nearest(f32x4.mul(x, f32x4.splat(1.44269504088896341)));
  // x − n·ln 2 in two parts (C1 exact in few bits), so r keeps its precision
  const r0 = f32x4.sub(x, f32x4.mul(fx, f32x4.splat(0.693359375)));
  const r = f32x4.sub(r0, f32x4.mul(fx, f32x4.splat(-2.12194440e-4)));
  return vexpReduced(fx, r);
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

/**
 * e^(hi + lo) for |lo| ≪ |hi|, hi + lo in [−87, 88]: vexp with lo added after the range
 * reduction, so an argument carried as an exact head and a small tail keeps the tail's bits.
 */
// @ts-ignore: decorator
@inline export function vexp2(hi: v128, lo: v128): v128 {
  const x = f32x4.pmin(f32x4.pmax(f32x4.add(hi, lo), f32x4.splat(-87.0)), f32x4.splat(88.0));
  const fx = f32x4.nearest(f32x4.mul(x, f32x4.splat(1.44269504088896341)));
  const r0 = f32x4.sub(hi, f32x4.mul(fx, f32x4.splat(0.693359375)));
  const r = f32x4.add(f32x4.sub(r0, f32x4.mul(fx, f32x4.splat(-2.12194440e-4))), lo);
  return vexpReduced(fx, r);
}

/**
 * −x²/2 as head + tail, for |x| = ax: the head from ax cut to 12 significant bits, whose square is
 * exact in float32; the tail −½·(ax − h)(ax + h) is the small rest. Rounding −x²/2 itself would
 * cost e^(−x²/2) |x²/2|·2⁻²⁴ of relative accuracy, 8 ulp by x = 4.
 */
// @ts-ignore: decorator
@inline export function vHalfSquareHead(ax: v128): v128 {
  const h = v128.and(ax, i32x4.splat(0xfffff000));
  return f32x4.mul(f32x4.splat(-0.5), f32x4.mul(h, h));
}

// @ts-ignore: decorator
@inline export function vHalfSquareTail(ax: v128): v128 {
  const h = v128.and(ax, i32x4.splat(0xfffff000));
  return f32x4.mul(f32x4.splat(-0.5), f32x4.mul(f32x4.sub(ax, h), f32x4.add(ax, h)));
}

/**
 * Φ(x) = ½·erfc(−x/√2) for x with |x| = ax and −x²/2 = hi + lo: the js reference's Chebyshev
 * fit (Numerical Recipes' erfcc, fractional error < 1.2e-7), erfc(z) = t·e^(−z² + P(t)),
 * t = 1/(1 + z/2), z = |x|/√2, in float32. Below x²/2 > 87 Φ is exactly 0 (1 above): its
 * float32 value would be a denormal at most.
 */
// @ts-ignore: decorator
@inline export function vnormalCdf(x: v128, ax: v128, hi: v128, lo: v128): v128 {
  const one = f32x4.splat(1);
  const t = f32x4.div(one, madd(ax, f32x4.splat(0.35355339059327373), one));
  let p = f32x4.splat(0.17087277);
  p = madd(p, t, f32x4.splat(-0.82215223));
  p = madd(p, t, f32x4.splat(1.48851587));
  p = madd(p, t, f32x4.splat(-1.13520398));
  p = madd(p, t, f32x4.splat(0.27886807));
  p = madd(p, t, f32x4.splat(-0.18628806));
  p = madd(p, t, f32x4.splat(0.09678418));
  p = madd(p, t, f32x4.splat(0.37409196));
  p = madd(p, t, f32x4.splat(1.00002368));
  p = madd(p, t, f32x4.splat(-1.26551223));
  let half = f32x4.mul(f32x4.mul(f32x4.splat(0.5), t), vexp2(hi, f32x4.add(p, lo)));
  half = v128.andnot(half, f32x4.lt(hi, f32x4.splat(-87.0)));
  // NaN fails x ≥ 0 and keeps the NaN half
  const tail = v128.bitselect(f32x4.sub(one, half), half, f32x4.ge(x, f32x4.splat(0)));
  // |x|/√2 < 0.84375: ½ + ½·erf(x/√2), fdlibm's erff rational z + z·P(z²)/Q(z²) (3.5e-9 relative
  // in float64), which keeps Φ near ½ to an ulp or two where the erfc fit's float32 sum loses several
  const z = f32x4.mul(x, f32x4.splat(0.7071067811865476)), z2 = f32x4.mul(z, z);
  let pp = f32x4.splat(-2.3763017452e-05);
  pp = madd(pp, z2, f32x4.splat(-5.7702702470e-03));
  pp = madd(pp, z2, f32x4.splat(-2.8481749818e-02));
  pp = madd(pp, z2, f32x4.splat(-3.2504209876e-01));
  pp = madd(pp, z2, f32x4.splat(1.2837916613e-01));
  let qq = f32x4.splat(-3.9602282413e-06);
  qq = madd(qq, z2, f32x4.splat(1.3249473704e-04));
  qq = madd(qq, z2, f32x4.splat(5.0813062117e-03));
  qq = madd(qq, z2, f32x4.splat(6.5022252500e-02));
  qq = madd(qq, z2, f32x4.splat(3.9791721106e-01));
  qq = madd(qq, z2, one);
  const erf = madd(z, f32x4.div(pp, qq), z);
  const near = madd(erf, f32x4.splat(0.5), f32x4.splat(0.5));
  return v128.bitselect(near, tail, f32x4.lt(ax, f32x4.splat(SMALL_PHI)));
}

/** Below this |x| vnormalCdf takes erf's rational: |x|/√2 < 0.84375, fdlibm's first interval. */
const SMALL_PHI: f32 = 1.1932427;
