// Inverted dropout with the Philox4x32-10 draws of src/tensor/rng.ts (CounterRng.at): the same
// numbers as the js kernel (src/kernels/js/dropout.ts), the high half of each 32×32-bit product
// taken exactly from a 64-bit one.

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
  while (j < n) {
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
