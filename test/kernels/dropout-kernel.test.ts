/**
 * Backend.dropoutForward: the js kernel against CounterRng.at element by element (the layer's draw
 * before the kernel existed), and every other available backend against js bit for bit (and
 * dropoutBackward, dx = dy·mask; a device backend's y as assertY allows), at counters
 * that start mid-block and past 2³² (the global sample index of a long run times the features).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { randomArray } from '../util/close.ts';
import { jsBackend } from '../../src/kernels/js/index.ts';
import { CounterRng } from '../../src/tensor/rng.ts';
import type { Backend } from '../../src/kernels/backend.ts';
import { availableBackends } from '../nn/sequenceHelpers.ts';
import { put, toHost } from './backendArrays.ts';
import { ulp } from '../webgpu/compareArrays.ts';

// 16 draws from a block's start run four blocks at a time in the wasm kernel: [2³⁴ − 32, 64) crosses
// block 2³², where the counter's high word changes between lanes; the onednn kernel runs 64 draws from
// a block's start at a time (16 blocks), so [2³⁴ − 36, 300) crosses it inside such a run
const CASES = [
  [0, 1],
  [0, 64],
  [3, 13],
  [1022, 1029],
  [5_000_000_003, 37],
  [2 ** 40 + 2, 9],
  [2 ** 34 - 32, 64],
  [2 ** 40, 48],
  [5, 200],
  [2 ** 34 - 36, 300],
] as const;

/** dropoutForward once on B, mask and y in B's memory (a device backend writes only its own arrays) and read back. */
async function run(B: Backend, rng: CounterRng, counter: number, n: number, keep: number) {
  const x = randomArray(n, n + 1),
    mask = put(B, new Float32Array(n)),
    y = put(B, new Float32Array(n));
  const [k0, k1] = rng.key;
  B.dropoutForward(k0, k1, counter, n, keep, 1 / keep, x, mask, y);
  await toHost(B, mask, y);
  return { x, mask, y };
}

test('js dropoutForward draws CounterRng.at(counter + i): mask scale or 0, y = x·mask rounded once', async () => {
  for (const keep of [0.5, 0.9]) {
    for (const [counter, n] of CASES) {
      const rng = new CounterRng(1, 2, 3, counter % 7);
      const { x, mask, y } = await run(jsBackend, rng, counter, n, keep);
      let kept = 0;
      for (let i = 0; i < n; i++) {
        const m = rng.at(counter + i) < keep ? 1 / keep : 0;
        assert.equal(mask[i], Math.fround(m), `mask ${i} at counter ${counter}`);
        assert.equal(y[i], Math.fround(x[i]! * m));
        if (m) kept++;
      }
      if (n >= 64) assert.ok(kept > 0 && kept < n, `some kept, some dropped (${kept} of ${n})`);
    }
  }
});

/**
 * y of backend B against js's: the CPU backends bit for bit. A device backend (webgpu) may differ
 * where the GPU cannot: WGSL lets it flush a subnormal product to a zero of the same sign
 * (SwiftShader does), and where the scale is not a float32 it rounds x·scale within 1 ulp of the
 * CPU's float64 product unless its fma is fused (src/kernels/webgpu/dropout.ts). All else bitwise.
 */
function assertY(B: Backend, got: Float32Array, want: Float32Array, scale: number, what: string): void {
  if (!B.device) {
    assert.deepEqual(Array.from(got), Array.from(want), what);
    return;
  }
  assert.equal(got.length, want.length, `${what}: length`);
  const scaleIsFloat32 = Math.fround(scale) === scale;
  for (let i = 0; i < want.length; i++) {
    const g = got[i]!,
      w = want[i]!;
    if (Object.is(g, w)) continue;
    const flushed = w !== 0 && Math.abs(w) < 2 ** -126 && Object.is(g, w < 0 ? -0 : 0);
    const rounded = !scaleIsFloat32 && Number.isFinite(w) && Math.abs(g - w) <= ulp(w);
    assert.ok(flushed || rounded, `${what}[${i}]: ${g}, js ${w}`);
  }
}

for (const B of (await availableBackends()).filter((b) => b.name !== 'js')) {
  test(`${B.name} dropoutForward and dropoutBackward equal js bit for bit (mid-block and past 2³² counters)`, async () => {
    for (const [counter, n] of CASES) {
      const rng = new CounterRng(9, counter);
      const want = await run(jsBackend, rng, counter, n, 0.7),
        got = await run(B, rng, counter, n, 0.7);
      assert.deepEqual(Array.from(got.mask), Array.from(want.mask), `${B.name} mask at counter ${counter}`);
      assertY(B, got.y, want.y, 1 / 0.7, `${B.name} y at counter ${counter}`);
      const dy = randomArray(n, 5),
        dxWant = new Float32Array(n),
        dxGot = put(B, new Float32Array(n));
      jsBackend.dropoutBackward(dy, want.mask, dxWant, n);
      B.dropoutBackward(dy, got.mask, dxGot, n);
      await toHost(B, dxGot);
      assert.deepEqual(Array.from(dxGot), Array.from(dxWant), `${B.name} dropoutBackward, ${n} elements`);
    }
  });

  test(`${B.name} dropoutForward equals js on signed zeros, infinities and NaN, keeping all and almost none`, async () => {
    const special = [-1, -0, 0, Infinity, -Infinity, NaN, 3.4e38, -1e-45];
    for (const keep of [1, 0.5, 1e-3]) {
      const n = 256,
        x = Float32Array.from({ length: n }, (_, i) => special[i % special.length]! * (1 + (i >> 3) / 64));
      const out = async (b: Backend) => {
        const mask = put(b, new Float32Array(n).fill(7)),
          y = put(b, new Float32Array(n).fill(7));
        b.dropoutForward(11, 12, 8, n, keep, 1 / keep, x, mask, y);
        await toHost(b, mask, y);
        return { mask, y };
      };
      const got = await out(B),
        want = await out(jsBackend);
      assert.deepEqual(Array.from(got.mask), Array.from(want.mask), `${B.name} mask at keep ${keep}`);
      assertY(B, got.y, want.y, 1 / keep, `${B.name} y at keep ${keep}`);
    }
  });
}
