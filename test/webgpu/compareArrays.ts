/** Inputs and comparisons for the webgpu kernel tests: seeded data, tolerances, bitwise equality. */
import assert from 'node:assert/strict';

/** n seeded uniforms in [lo, hi) (float32). */
export function random(n: number, seed: number, lo = -1, hi = 1): Float32Array {
  const a = new Float32Array(n);
  let s = seed >>> 0;
  for (let i = 0; i < n; i++) {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    a[i] = lo + (hi - lo) * (s / 2 ** 32);
  }
  return a;
}

/** Asserts |got − want| ≤ tolerance(want, i) everywhere (NaN only where want is NaN). */
export function assertClose(
  got: Float32Array,
  want: ArrayLike<number>,
  tolerance: (want: number, i: number) => number,
  what: string,
): void {
  assert.equal(got.length, want.length, `${what}: length`);
  for (let i = 0; i < want.length; i++) {
    const g = got[i]!,
      w = want[i]!;
    if (Number.isNaN(w) || Number.isNaN(g)) {
      assert.ok(Number.isNaN(w) && Number.isNaN(g), `${what}: [${i}] ${g}, want ${w}`);
      continue;
    }
    if (g === w) continue;
    assert.ok(Math.abs(g - w) <= tolerance(w, i), `${what}: [${i}] ${g}, want ${w} (off by ${Math.abs(g - w)})`);
  }
}

/** Asserts the same float32 bits everywhere (−0 differs from 0; NaN equals a NaN of the same bits). */
export function assertBitwise(got: Float32Array, want: Float32Array, what: string): void {
  assert.equal(got.length, want.length, `${what}: length`);
  const g = new Uint32Array(got.buffer, got.byteOffset, got.length),
    w = new Uint32Array(want.buffer, want.byteOffset, want.length);
  for (let i = 0; i < w.length; i++)
    if (g[i] !== w[i])
      assert.fail(`${what}: [${i}] ${got[i]} (0x${g[i]!.toString(16)}), want ${want[i]} (0x${w[i]!.toString(16)})`);
}

/** The float32 unit in the last place at |v| (the gap above it). */
export function ulp(v: number): number {
  const a = Math.abs(Math.fround(v));
  if (a < 2 ** -126) return 2 ** -149;
  return 2 ** (Math.floor(Math.log2(a)) - 23);
}
