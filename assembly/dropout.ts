// Inverted dropout with the Philox4x32-10 draws of src/tensor/rng.ts (CounterRng.at): the same
// numbers as the js kernel (src/kernels/js/dropout.ts), the high half of each 32×32-bit product
// taken exactly from a 64-bit one; four blocks at a time in SIMD lanes where 16 draws in a row start
// a block.

import { at } from './simd';

const M0: u64 = 0xd2511f53;
const M1: u64 = 0xcd9e8d57;
const W0: u32 = 0x9e3779b9;
const W1: u32 = 0xbb67ae85;
const TO_UNIT: f64 = 1.0 / 4294967296.0;

/**
 * mask[j] = scale where draw counter + j (·2⁻³²) < keep, else 0; y[j] = x[j]·mask[j] in float64,
 * rounded once; j < n. `counter` is an integer below 2⁵³.
 */
export function dropoutForward(k0: u32, k1: u32, counter: f64, n: i32, keep: f64, scale: f64, x: usize, mask: usize, y: usize): void {
  let c = <u64>counter;
  let j = 0;
  // draw u is kept where u·2⁻³² < keep, that is u < ⌈keep·2³²⌉ (an integer; 2³² keeps all)
  const bound = Math.ceil(keep * 4294967296.0), all = bound >= 4294967296.0;
  while (j < n) {
    if ((c & 3) == 0 && j + 16 <= n) {
      fourBlocks(k0, k1, c >> 2, all, <u32>bound, scale, at(x, j), at(mask, j), at(y, j));
      j += 16; c += 16;
      continue;
    }
    const b = c >> 2;
    let c0 = <u32>b, c1 = <u32>(b >> 32), c2: u32 = 0, c3: u32 = 0, key0 = k0, key1 = k1;
    for (let round = 0; round < 10; round++) {
      const p0 = M0 * <u64>c0, p1 = M1 * <u64>c2;
      const n0 = <u32>(p1 >> 32) ^ c1 ^ key0;
      const n2 = <u32>(p0 >> 32) ^ c3 ^ key1;
      c0 = n0; c1 = <u32>p1; c2 = n2; c3 = <u32>p0;
      key0 += W0; key1 += W1;
    }
    if ((c & 3) == 0 && j + 4 <= n) {
      // a whole block: its four draws in order
      put(j, c0, keep, scale, x, mask, y); put(j + 1, c1, keep, scale, x, mask, y);
      put(j + 2, c2, keep, scale, x, mask, y); put(j + 3, c3, keep, scale, x, mask, y);
      j += 4; c += 4;
      continue;
    }
    for (let k = <i32>(c & 3); k < 4 && j < n; k++, j++, c++) put(j, k == 0 ? c0 : k == 1 ? c1 : k == 2 ? c2 : c3, keep, scale, x, mask, y);
  }
}

/** Element j from draw u. */
// @ts-ignore: decorator
@inline function put(j: i32, u: u32, keep: f64, scale: f64, x: usize, mask: usize, y: usize): void {
  const m: f64 = <f64>u * TO_UNIT < keep ? scale : 0.0;
  store<f32>(at(mask, j), <f32>m);
  store<f32>(at(y, j), <f32>(<f64>load<f32>(at(x, j)) * m));
}

/** Elements j … j + 3 from the draws in `u`, at byte addresses x, mask, y. */
// @ts-ignore: decorator
@inline function putFour(u: v128, all: bool, bound: u32, scale: f64, x: usize, mask: usize, y: usize): void {
  const kept = all ? i32x4.splat(-1) : i32x4.lt_u(u, i32x4.splat(<i32>bound));
  v128.store(mask, v128.and(f32x4.splat(<f32>scale), kept));
  const s = f64x2.splat(scale), xs = v128.load(x);
  const lo = f64x2.mul(f64x2.promote_low_f32x4(xs), v128.and(s, i64x2.extend_low_i32x4_s(kept)));
  const hi = f64x2.mul(f64x2.promote_low_f32x4(v128.shuffle<f32>(xs, xs, 2, 3, 2, 3)), v128.and(s, i64x2.extend_high_i32x4_s(kept)));
  v128.store(y, v128.shuffle<i32>(f32x4.demote_f64x2_zero(lo), f32x4.demote_f64x2_zero(hi), 0, 1, 4, 5));
}

/** 16 elements from Philox blocks b … b + 3, one block to a lane, then their outputs in counter order. */
function fourBlocks(k0: u32, k1: u32, b: u64, all: bool, bound: u32, scale: f64, x: usize, mask: usize, y: usize): void {
  let c0 = i32x4.splat(<i32>b), c1 = i32x4.splat(<i32>(b >> 32));
  c0 = i32x4.replace_lane(c0, 1, <i32>(b + 1)); c1 = i32x4.replace_lane(c1, 1, <i32>((b + 1) >> 32));
  c0 = i32x4.replace_lane(c0, 2, <i32>(b + 2)); c1 = i32x4.replace_lane(c1, 2, <i32>((b + 2) >> 32));
  c0 = i32x4.replace_lane(c0, 3, <i32>(b + 3)); c1 = i32x4.replace_lane(c1, 3, <i32>((b + 3) >> 32));
  let c2 = i32x4.splat(0), c3 = i32x4.splat(0), key0 = i32x4.splat(<i32>k0), key1 = i32x4.splat(<i32>k1);
  const m0 = i32x4.splat(<i32>M0), m1 = i32x4.splat(<i32>M1), w0 = i32x4.splat(<i32>W0), w1 = i32x4.splat(<i32>W1);
  for (let round = 0; round < 10; round++) {
    // each lane's 32×32 → 64-bit products, split into their high and low halves
    const a0 = i64x2.extmul_low_i32x4_u(m0, c0), b0 = i64x2.extmul_high_i32x4_u(m0, c0);
    const a1 = i64x2.extmul_low_i32x4_u(m1, c2), b1 = i64x2.extmul_high_i32x4_u(m1, c2);
    const hi0 = v128.shuffle<i32>(a0, b0, 1, 3, 5, 7), lo0 = v128.shuffle<i32>(a0, b0, 0, 2, 4, 6);
    const hi1 = v128.shuffle<i32>(a1, b1, 1, 3, 5, 7), lo1 = v128.shuffle<i32>(a1, b1, 0, 2, 4, 6);
    const n0 = v128.xor(v128.xor(hi1, c1), key0), n2 = v128.xor(v128.xor(hi0, c3), key1);
    c0 = n0; c1 = lo1; c2 = n2; c3 = lo0;
    key0 = i32x4.add(key0, w0); key1 = i32x4.add(key1, w1);
  }
  // lane i holds block b + i's four outputs (c0 … c3): transpose to blocks in order
  const t0 = v128.shuffle<i32>(c0, c1, 0, 4, 1, 5), t1 = v128.shuffle<i32>(c2, c3, 0, 4, 1, 5);
  const t2 = v128.shuffle<i32>(c0, c1, 2, 6, 3, 7), t3 = v128.shuffle<i32>(c2, c3, 2, 6, 3, 7);
  putFour(v128.shuffle<i32>(t0, t1, 0, 1, 4, 5), all, bound, scale, x, mask, y);
  putFour(v128.shuffle<i32>(t0, t1, 2, 3, 6, 7), all, bound, scale, x + 16, mask + 16, y + 16);
  putFour(v128.shuffle<i32>(t2, t3, 0, 1, 4, 5), all, bound, scale, x + 32, mask + 32, y + 32);
  putFour(v128.shuffle<i32>(t2, t3, 2, 3, 6, 7), all, bound, scale, x + 48, mask + 48, y + 48);
}

/** dx = dy·mask elementwise (a float32 product: the float64 one rounded once). */
export function dropoutBackward(dy: usize, mask: usize, dx: usize, n: i32): void {
  let i = 0;
  for (; i + 4 <= n; i += 4) v128.store(at(dx, i), f32x4.mul(v128.load(at(dy, i)), v128.load(at(mask, i))));
  for (; i < n; i++) store<f32>(at(dx, i), load<f32>(at(dy, i)) * load<f32>(at(mask, i)));
}
