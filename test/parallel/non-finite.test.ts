/** allFinite, the check every step makes of its gradient: one NaN or ±Inf anywhere, any length (fast-check, fixed seed). */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { allFinite } from '../../src/parallel/nonFinite.ts';

test('allFinite finds one NaN or ±Inf at any position of any length, and passes finite buffers (extremes included)', () => {
  const finite = fc.float({ noNaN: true, noDefaultInfinity: true });
  fc.assert(
    fc.property(
      fc.array(finite, { maxLength: 70 }),
      fc.nat(),
      fc.constantFrom(NaN, Infinity, -Infinity),
      (values, at, bad) => {
        const buf = Float32Array.from(values);
        assert.equal(allFinite(buf), true);
        if (buf.length === 0) return;
        buf[at % buf.length] = bad;
        assert.equal(allFinite(buf), false, `${bad} at ${at % buf.length} of ${buf.length}`);
      },
    ),
    { seed: 19, numRuns: 500 },
  );
  // the largest floats: x − x is still 0, and no sum of zeros overflows
  assert.equal(allFinite(new Float32Array(9).fill(3.4028234663852886e38)), true);
  assert.equal(allFinite(new Float32Array(0)), true);
});
