/**
 * WGSL for each activation kind, forward (y from x) and backward (dx from dy and the forward output,
 * or for gelu the forward input), with the formulas of src/kernels/js/elementwise.ts in float32.
 * tanh and sigmoid are written out rather than taken from WGSL's builtins, whose accuracy the spec
 * leaves loose (tanh may lose all relative accuracy near 0) and which may overflow to NaN.
 */
import type { ActivationKind } from '../activation.ts';
import { linearMain } from './arrayBindings.ts';

/** isNan, tanhOf, sigmoidOf and normalCdf, for every shader that applies them (the recurrent cells too). */
export const ACTIVATION_FUNCTIONS = /* wgsl */ `
// on the bits: WGSL lets a compiler assume that float comparisons never meet a NaN
fn isNan(v: f32) -> bool { return (bitcast<u32>(v) & 0x7fffffffu) > 0x7f800000u; }

// Cephes' tanhf: an odd polynomial below 0.625 (no cancellation near 0), 1 − 2/(e^2|v| + 1) above,
// |v| capped at 10 where tanh is 1 in float32, so exp never overflows
fn tanhOf(v: f32) -> f32 {
  let a = abs(v);
  var t: f32;
  if (a < 0.625) {
    let z = v * v;
    t = ((((-5.70498872745e-3 * z + 2.06390887954e-2) * z - 5.37397155531e-2) * z + 1.33314422036e-1) * z
        - 3.33332819422e-1) * z * v + v;
  } else {
    t = sign(v) * (1.0 - 2.0 / (exp(2.0 * min(a, 10.0)) + 1.0));
  }
  return select(t, v, isNan(v));
}

// e^x for x ≤ 0 to a few ulp: WGSL's exp may be off by 3 + 2|x| ulp (1e-6 relative at x = −30), so
// x = k·ln2 + r (Cephes' split of ln2, k·0.693359375 exact) and exp only of |r| ≤ ln2/2; below −104 it is 0
fn expNonPositive(x: f32) -> f32 {
  let y = max(x, -104.0);
  let k = round(y * 1.44269504089);
  let r = (y - k * 0.693359375) + k * 2.12194440e-4;
  return ldexp(exp(r), i32(k));
}

// exp of −|v| only, so it never overflows: e/(1 + e) below 0, 1/(1 + e) above
fn sigmoidOf(v: f32) -> f32 {
  let e = expNonPositive(-abs(v));
  return select(select(e / (1.0 + e), 1.0 / (1.0 + e), v >= 0.0), v, isNan(v));
}

// Φ(x) = ½·erfc(−x/√2), erfc from the Chebyshev fit the CPU backends use (normalCdf)
fn normalCdf(x: f32) -> f32 {
  let z = abs(x) * 0.7071067811865476;
  let t = 1.0 / (1.0 + 0.5 * z);
  // −z² as −x²/2: one rounding where z·z would add those of z and of its square
  let erfc = t * exp(-0.5 * x * x - 1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418 + t * (-0.18628806
      + t * (0.27886807 + t * (-1.13520398 + t * (1.48851587 + t * (-0.82215223 + t * 0.17087277)))))))));
  return select(0.5 * erfc, 1.0 - 0.5 * erfc, x >= 0.0);
}
`;

/** y from v = x; `p.capAbove`: the largest float32 ≤ cap (v > cap ⇔ v > capAbove), `p.param`: cap or slope. */
const FORWARD: Record<ActivationKind, string> = {
  relu: 'select(v, 0.0, v < 0.0)',
  clippedRelu: 'select(select(v, p.param, v > p.capAbove), 0.0, v < 0.0)',
  tanh: 'tanhOf(v)',
  sigmoid: 'sigmoidOf(v)',
  linear: 'v',
  gelu: 'v * normalCdf(v)',
  leakyRelu: 'select(v, p.param * v, v < 0.0)',
};

/** dx from v = y (gelu: x) and g = dy; `p.capBelow`: the smallest float32 ≥ cap (v < cap ⇔ v < capBelow). */
const BACKWARD: Record<ActivationKind, string> = {
  relu: 'select(0.0, g, v > 0.0)',
  clippedRelu: 'select(0.0, g, v > 0.0 && v < p.capBelow)',
  // (1 − v)(1 + v) rather than 1 − v²: exact where tanh is near ±1 and v² would round
  tanh: 'g * ((1.0 - v) * (1.0 + v))',
  sigmoid: 'g * v * (1.0 - v)',
  linear: 'g',
  gelu: 'g * (normalCdf(v) + v * 0.3989422804014327 * exp(-0.5 * v * v))',
  leakyRelu: 'select(p.param * g, g, v > 0.0)',
};

/** The forward kernel of `kind`: arrays x and y, fields of ACTIVATION_FIELDS. */
export function forwardShader(kind: ActivationKind): string {
  return ACTIVATION_FUNCTIONS + linearMain('p.n', `  let v = ld_x(i);\n  st_y(i, ${FORWARD[kind]});`);
}

/** The backward kernel of `kind`: arrays y (gelu: x), dy and dx. */
export function backwardShader(kind: ActivationKind): string {
  return (
    ACTIVATION_FUNCTIONS + linearMain('p.n', `  let v = ld_y(i);\n  let g = ld_dy(i);\n  st_dx(i, ${BACKWARD[kind]});`)
  );
}

/** The Params fields after the arrays' offsets, in order. */
export const ACTIVATION_FIELDS = 'n: u32, param: f32, capAbove: f32, capBelow: f32';
