import assert from 'node:assert/strict';

/** Max |a−b| / (atol + rtol·|b|) over all elements must be ≤ 1; reports the worst element. */
export function assertClose(
  actual: ArrayLike<number>,
  expected: ArrayLike<number>,
  opts: { rtol?: number; atol?: number; what?: string } = {},
): void {
  const { rtol = 1e-5, atol = 1e-6, what = 'values' } = opts;
  assert.equal(actual.length, expected.length, `${what}: length ${actual.length} != ${expected.length}`);
  let worst = 0,
    at = -1;
  for (let i = 0; i < actual.length; i++) {
    const a = actual[i]!,
      e = expected[i]!;
    if (!Number.isFinite(a) && a !== e) assert.fail(`${what}[${i}]: got ${a}, expected ${e}`);
    const r = Math.abs(a - e) / (atol + rtol * Math.abs(e));
    if (r > worst) {
      worst = r;
      at = i;
    }
  }
  if (worst > 1)
    assert.fail(`${what}[${at}]: got ${actual[at]}, expected ${expected[at]} (rtol ${rtol}, atol ${atol})`);
}

/** Deterministic pseudo-random fill in [-1, 1) for test inputs. */
export function randomArray(length: number, seed = 1): Float32Array {
  const out = new Float32Array(length);
  let s = seed >>> 0 || 1;
  for (let i = 0; i < length; i++) {
    s ^= s << 13;
    s >>>= 0;
    s ^= s >>> 17;
    s ^= s << 5;
    s >>>= 0;
    out[i] = (s / 4294967296) * 2 - 1;
  }
  return out;
}
