/**
 * The webgpu Philox4x32-10 and dropout against the CPU definition: the Random123 known-answer
 * vectors (those of test/tensor/rng.test.ts), raw words equal to rng.ts's for counters that carry
 * into the high word, and dropout masks bitwise equal to the js backend's for several keys,
 * counters (unaligned to blocks, past 2³² and 2³⁴) and keep rates. y equals the js backend's bits
 * where the scale is a float32 (1/0.5, 1/0.8); otherwise within 1 ulp (the CPU rounds x·scale
 * from float64). The backward is a float32 product: bitwise.
 */
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { jsBackend } from '../../src/kernels/js/index.ts';
import { CounterRng, philox4x32 } from '../../src/tensor/rng.ts';
import { dropoutBackward, dropoutForward } from '../../src/kernels/webgpu/dropout.ts';
import { gpuView } from '../../src/kernels/webgpu/gpuArray.ts';
import { philox4x32Blocks } from '../../src/kernels/webgpu/philox.ts';
import { assertBitwise, assertClose, random, ulp } from './compareArrays.ts';
import { gpuOrSkip, releaseGpu } from './gpuTest.ts';

after(releaseGpu);

const asFloats = (u: Uint32Array) => new Float32Array(u.buffer, u.byteOffset, u.length);
const asWords = (f: Float32Array) => new Uint32Array(f.buffer, f.byteOffset, f.length);

test('philox: the Random123 known-answer vectors and rng.ts words for counters across 2³²', async (t) => {
  const gpu = await gpuOrSkip(t);
  if (!gpu) return;
  const vectors: [number[], number[], number[]][] = [
    [
      [0, 0, 0, 0],
      [0, 0],
      [0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8],
    ],
    [
      [0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff],
      [0xffffffff, 0xffffffff],
      [0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd],
    ],
    [
      [0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344],
      [0xa4093822, 0x299f31d0],
      [0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1],
    ],
  ];
  for (const [counter, [k0, k1], want] of vectors) {
    const out = gpu.array(4);
    philox4x32Blocks(gpu, gpu.upload(asFloats(Uint32Array.from(counter))), k0!, k1!, out);
    const [got] = await gpu.read(out);
    assert.deepEqual([...asWords(got!)], want, `counter ${counter.map((c) => c.toString(16))}`);
  }
  // 300 blocks (five workgroups) from a counter whose low word wraps, under a hashed key
  const [k0, k1] = new CounterRng(7, 11).key;
  const counters = new Uint32Array(4 * 300),
    want = new Uint32Array(4 * 300),
    block = new Uint32Array(4);
  for (let b = 0; b < 300; b++) {
    const c = [(0xffffff00 + b) >>> 0, b >= 256 ? 6 : 5, b, 0xabcdef];
    counters.set(c, 4 * b);
    philox4x32(c[0]!, c[1]!, c[2]!, c[3]!, k0, k1, block);
    want.set(block, 4 * b);
  }
  const out = gpu.array(4 * 300);
  philox4x32Blocks(gpu, gpu.upload(asFloats(counters)), k0, k1, out);
  const [got] = await gpu.read(out);
  assert.deepEqual([...asWords(got!)], [...want]);
});

test('dropoutForward: masks bitwise equal to the js backend for several keys, counters and keep rates', async (t) => {
  const gpu = await gpuOrSkip(t);
  if (!gpu) return;
  const cases: { key: readonly number[]; counter: number; n: number; keep: number }[] = [
    { key: [1], counter: 0, n: 1, keep: 0.5 },
    { key: [1], counter: 3, n: 257, keep: 0.5 },
    { key: [2, 9], counter: 1001, n: 4099, keep: 0.8 },
    { key: [3], counter: 2 ** 34 - 6, n: 1000, keep: 0.9 },
    { key: [4, 4], counter: 2 ** 40 + 1, n: 777, keep: 0.1 },
    { key: [5], counter: 2 ** 53 - 2000, n: 1999, keep: 0.7 },
    { key: [6], counter: 17, n: 300, keep: 1 },
    { key: [6], counter: 17, n: 300, keep: 0 },
  ];
  for (const { key, counter, n, keep } of cases) {
    const [k0, k1] = new CounterRng(...key).key;
    const scale = keep > 0 ? 1 / keep : 0;
    const x = random(n, n + counter);
    const mask = new Float32Array(n),
      y = new Float32Array(n);
    jsBackend.dropoutForward(k0, k1, counter, n, keep, scale, x, mask, y);
    // at offsets inside larger buffers
    const gx = gpuView(gpu.upload(random(n + 5, 1)), 5, n);
    gpu.upload(x, gx);
    const gm = gpuView(gpu.array(n + 3), 3, n),
      gy = gpuView(gpu.array(n + 9), 9, n);
    dropoutForward(gpu, k0, k1, counter, n, keep, scale, gx, gm, gy);
    const [gotMask, gotY] = await gpu.read(gm, gy);
    const what = `key ${key} counter ${counter} n ${n} keep ${keep}`;
    assertBitwise(gotMask!, mask, `${what}: mask`);
    if (Math.fround(scale) === scale) assertBitwise(gotY!, y, `${what}: y`);
    else assertClose(gotY!, y, (w) => ulp(w), `${what}: y`);
    const kept = mask.reduce((s, m) => s + (m > 0 ? 1 : 0), 0);
    if (n >= 200 && keep > 0 && keep < 1) assert.ok(Math.abs(kept / n - keep) < 0.1, `${what}: kept ${kept}`);
  }
});

test('dropoutForward: y in place over x, NaN and ±Inf kept and dropped; dropoutBackward bitwise, in place', async (t) => {
  const gpu = await gpuOrSkip(t);
  if (!gpu) return;
  const n = 1031,
    keep = 0.8,
    [k0, k1] = new CounterRng(42).key;
  const x = random(n, 5),
    mask = new Float32Array(n),
    y = new Float32Array(n);
  // NaN and ±Inf, kept and dropped, come out as the js backend gives them (∞·0 is NaN)
  x.set([Number.NaN, Infinity, -Infinity, Number.NaN, Infinity, -Infinity, Number.NaN, Infinity, -Infinity, -0]);
  jsBackend.dropoutForward(k0, k1, 12345, n, keep, 1 / keep, x, mask, y);
  assert.ok(mask.subarray(0, 10).some((m) => m === 0) && mask.subarray(0, 10).some((m) => m > 0));
  const gx = gpu.upload(x),
    gm = gpu.array(n);
  dropoutForward(gpu, k0, k1, 12345, n, keep, 1 / keep, gx, gm, gx);
  const [gotY, gotMask] = await gpu.read(gx, gm);
  assertBitwise(gotMask!, mask, 'mask');
  assertBitwise(gotY!, y, 'y in place');

  const dy = random(n, 8),
    dx = new Float32Array(n);
  jsBackend.dropoutBackward(dy, mask, dx, n);
  // dy, mask and dx as views of one buffer; then dx over dy
  const flat = gpu.upload(new Float32Array([...random(2, 3), ...dy, ...mask, ...random(n, 4)]));
  const gdy = gpuView(flat, 2, n),
    gmask = gpuView(flat, 2 + n, n),
    gdx = gpuView(flat, 2 + 2 * n, n);
  dropoutBackward(gpu, gdy, gmask, gdx, n);
  const [got] = await gpu.read(gdx);
  assertBitwise(got!, dx, 'dx');
  dropoutBackward(gpu, gdy, gmask, gdy, n);
  const [inPlace] = await gpu.read(gdy);
  assertBitwise(inPlace!, dx, 'dx in place');
});

test('dropoutForward: a counter outside [0, 2^53) or a short array is refused', async (t) => {
  const gpu = await gpuOrSkip(t);
  if (!gpu) return;
  const a = gpu.array(8);
  assert.throws(() => dropoutForward(gpu, 1, 2, -1, 8, 0.5, 2, a, a, a), /counter -1 must be an integer/);
  assert.throws(() => dropoutForward(gpu, 1, 2, 0.5, 8, 0.5, 2, a, a, a), /counter 0.5/);
  assert.throws(() => dropoutForward(gpu, 1, 2, 0, 9, 0.5, 2, a, a, a), /n = 9 but x has 8/);
});
