// Shared SIMD helpers. `ASC_FEATURE_RELAXED_SIMD` is a compile-time constant: the relaxed build
// (`--enable relaxed-simd`) turns every multiply-add into one f32x4.relaxed_madd (an FMA on x64).

/** a·b + c, fused in the relaxed build. */
// @ts-ignore: decorator
@inline export function madd(a: v128, b: v128, c: v128): v128 {
  if (ASC_FEATURE_RELAXED_SIMD) return f32x4.relaxed_madd(a, b, c);
  return f32x4.add(f32x4.mul(a, b), c);
}

/** Byte address of element i of a float/int32 array at `p`. */
// @ts-ignore: decorator
@inline export function at(p: usize, i: i32): usize {
  return p + (<usize>i << 2);
}

/** dst[0..n) = 0 */
export function zeroF32(dst: usize, n: i32): void {
  const z = f32x4.splat(0);
  let i = 0;
  for (; i + 4 <= n; i += 4) v128.store(at(dst, i), z);
  for (; i < n; i++) store<f32>(at(dst, i), 0);
}

/** dst[0..n) = src[0..n) (non-overlapping). */
// @ts-ignore: decorator
@inline export function copyF32(dst: usize, src: usize, n: i32): void {
  let i = 0;
  for (; i + 4 <= n; i += 4) v128.store(at(dst, i), v128.load(at(src, i)));
  for (; i < n; i++) store<f32>(at(dst, i), load<f32>(at(src, i)));
}

/** dst[0..n) += src[0..n) */
// @ts-ignore: decorator
@inline export function addF32(dst: usize, src: usize, n: i32): void {
  let i = 0;
  for (; i + 4 <= n; i += 4) v128.store(at(dst, i), f32x4.add(v128.load(at(dst, i)), v128.load(at(src, i))));
  for (; i < n; i++) store<f32>(at(dst, i), load<f32>(at(dst, i)) + load<f32>(at(src, i)));
}
