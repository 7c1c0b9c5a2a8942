/**
 * Backend.copyRows: every available backend against the js definition, bit for bit (copies, adds,
 * rows of zeros, widths that are and are not multiples of the SIMD width, no rows), against a
 * loop written out here, and the bounds every backend checks before touching memory.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { randomArray } from '../util/close.ts';
import { jsBackend } from '../../src/kernels/js/index.ts';
import type { Backend } from '../../src/kernels/backend.ts';
import { availableBackends } from '../nn/sequenceHelpers.ts';
import { put, toHost } from './backendArrays.ts';

/** A permutation of `rows` row starts (stride `stride`), a few of them −1 when `holes`. */
function starts(rows: number, stride: number, seed: number, holes: boolean): Int32Array {
  const order = [...Array(rows).keys()].sort((a, b) => Math.sin(a * 12.9898 + seed) - Math.sin(b * 12.9898 + seed));
  return Int32Array.from(order, (r, i) => (holes && i % 5 === 3 ? -1 : r * stride));
}

/** copyRows once on B, `to` in B's memory (a device backend writes only its own arrays) and read back. */
async function run(B: Backend, width: number, rows: number, add: boolean) {
  const stride = width + 3,
    from = randomArray(rows * stride, 7),
    to = put(B, randomArray(rows * stride + 5, 8));
  const fromStarts = starts(rows, stride, 1, true),
    toStarts = starts(rows, stride, 2, false).map((s) => s + 2);
  B.copyRows(from, fromStarts, to, toStarts, rows, width, add);
  await toHost(B, to);
  return { from, fromStarts, toStarts, to };
}

test('js copyRows: the rows copied or added, −1 rows zero (or untouched when adding), nothing else written', async () => {
  for (const add of [false, true]) {
    const { from, fromStarts, toStarts, to } = await run(jsBackend, 6, 20, add);
    const want = randomArray(to.length, 8);
    for (let i = 0; i < 20; i++) {
      for (let j = 0; j < 6; j++) {
        const f = fromStarts[i]!,
          t = toStarts[i]! + j;
        want[t] = f < 0 ? (add ? want[t]! : 0) : add ? Math.fround(want[t]! + from[f + j]!) : from[f + j]!;
      }
    }
    assert.ok(fromStarts.includes(-1), 'some rows are −1');
    assert.deepEqual(to, want, add ? 'added' : 'copied');
    assert.deepEqual((await run(jsBackend, 0, 20, add)).to, randomArray(20 * 3 + 5, 8), 'width 0 writes nothing');
  }
});

for (const B of (await availableBackends()).filter((b) => b.name !== 'js')) {
  test(`${B.name} copyRows equals js bit for bit`, async () => {
    for (const add of [false, true]) {
      for (const [width, rows] of [
        [0, 4],
        [1, 9],
        [5, 13],
        [8, 7],
        [96, 64],
        [37, 0],
      ] as const) {
        assert.deepEqual(
          (await run(B, width, rows, add)).to,
          (await run(jsBackend, width, rows, add)).to,
          `${B.name}: width ${width}, ${rows} rows, add ${add}`,
        );
      }
    }
  });
}

for (const B of await availableBackends()) {
  test(`${B.name} copyRows refuses rows outside their arrays before writing`, async () => {
    const from = new Float32Array(10),
      to = put(B, new Float32Array(10).fill(3));
    const call = (f: number[], t: number[], width = 4) =>
      B.copyRows(from, Int32Array.from(f), to, Int32Array.from(t), f.length, width, false);
    assert.throws(() => call([0, 7], [0, 4]), /copyRows: row 1 reads from\[7 … 11\) of 10 values/);
    assert.throws(() => call([0, 0], [0, 7]), /copyRows: row 1 writes to\[7 … 11\) of 10 values/);
    assert.throws(() => call([-2], [0]), /copyRows: row 0 reads from\[-2/);
    assert.throws(() => B.copyRows(from, Int32Array.of(0), to, Int32Array.of(0), 2, 1, false), /2 rows need 2 starts/);
    await toHost(B, to);
    assert.ok(
      to.every((v) => v === 3),
      'nothing written',
    );
  });
}
