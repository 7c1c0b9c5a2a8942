/**
 * The webgpu pooling kernels against the js backend on every shape of POOL_CASES
 * (test/kernels/reference.ts) and a window wholly in the padding; inputs with many ties and a NaN
 * (max pool keeps the first of ties, NaN wins); views at offsets, with x, y and argmax in one
 * buffer; and more threads than one dimension of workgroups holds. Max pool (y, argmax and the
 * gradient, summed in js's order) must give js's bits; average pool, rounded differently (an f32
 * reciprocal against js's f64 one), rtol 1e-6 and atol 1e-7 per window cell summed.
 */
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { jsBackend } from '../../src/kernels/js/index.ts';
import type { Pool2DGeometry } from '../../src/kernels/poolKernels.ts';
import { gpuView } from '../../src/kernels/webgpu/gpuArray.ts';
import type { GpuContext } from '../../src/kernels/webgpu/gpuContext.ts';
import { avgPoolBackward, avgPoolForward, maxPoolBackward, maxPoolForward } from '../../src/kernels/webgpu/pooling.ts';
import { assertClose, randomArray } from '../util/close.ts';
import { POOL_CASES, describePool, poolGeometry, poolSizes } from '../kernels/reference.ts';
import { gpuOrSkip, releaseGpu } from './gpuTest.ts';

after(releaseGpu);

/** Every element's bits equal (so −0 ≠ 0 and NaN = NaN). */
function assertSameBits(got: Float32Array | Int32Array, want: Float32Array | Int32Array, what: string): void {
  const a = new Int32Array(got.buffer, got.byteOffset, got.length),
    b = new Int32Array(want.buffer, want.byteOffset, want.length);
  assert.equal(a.length, b.length, `${what}: length`);
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) assert.fail(`${what}[${i}]: ${got[i]} vs ${want[i]}`);
}

/** assertClose, where NaN must meet NaN. */
function assertCloseOrNaN(
  got: Float32Array,
  want: Float32Array,
  opts: { rtol: number; atol: number; what: string },
): void {
  const nan = want.map((v) => (Number.isNaN(v) ? 1 : 0));
  assert.deepEqual(
    got.map((v) => (Number.isNaN(v) ? 1 : 0)),
    nan,
    `${opts.what}: NaN where js has it`,
  );
  assertClose(
    got.map((v, i) => (nan[i] ? 0 : v)),
    want.map((v, i) => (nan[i] ? 0 : v)),
    opts,
  );
}

const asInt = (a: Float32Array) => new Int32Array(a.buffer, a.byteOffset, a.length);

/** Values in {−1, −0.5, 0, 0.5}: most windows hold ties. */
function withTies(n: number, seed: number): Float32Array {
  return randomArray(n, seed).map((v) => Math.floor(v * 2) / 2);
}

async function checkPool(gpu: GpuContext, g: Pool2DGeometry, x: Float32Array, seed: number): Promise<void> {
  const s = poolSizes(g);
  const what = describePool(g);
  const maxWindow = g.KH * g.KW;
  const dy = randomArray(s.y, seed);
  const gx = gpu.upload(x),
    gdy = gpu.upload(dy);
  const nan = (n: number) => gpu.upload(new Float32Array(n).fill(Number.NaN));
  const gy = nan(s.y),
    gArg = nan(s.y),
    gdx = nan(s.x),
    gAvg = nan(s.y),
    gAvgDx = nan(s.x);
  maxPoolForward(gpu, gx, gy, gArg, g);
  maxPoolBackward(gpu, gdy, gArg, gdx, g);
  avgPoolForward(gpu, gx, gAvg, g);
  avgPoolBackward(gpu, gdy, gAvgDx, g);
  const [y, arg, dx, avg, avgDx] = await gpu.read(gy, gArg, gdx, gAvg, gAvgDx);
  const want = {
    y: new Float32Array(s.y),
    arg: new Int32Array(s.y),
    dx: new Float32Array(s.x),
    avg: new Float32Array(s.y),
    avgDx: new Float32Array(s.x),
  };
  jsBackend.maxPoolForward(x, want.y, want.arg, g);
  jsBackend.maxPoolBackward(dy, want.arg, want.dx, g);
  jsBackend.avgPoolForward(x, want.avg, g);
  jsBackend.avgPoolBackward(dy, want.avgDx, g);
  assertSameBits(y!, want.y, `${what} max y`);
  assertSameBits(asInt(arg!), want.arg, `${what} argmax`);
  assertSameBits(dx!, want.dx, `${what} max dx`);
  assertCloseOrNaN(avg!, want.avg, { rtol: 1e-6, atol: 1e-7 * maxWindow, what: `${what} avg y` });
  assertCloseOrNaN(avgDx!, want.avgDx, { rtol: 1e-6, atol: 1e-7 * maxWindow, what: `${what} avg dx` });
}

test('max and average pooling, forward and backward, equal the js backend on every shape', async (t) => {
  const gpu = await gpuOrSkip(t);
  if (!gpu) return;
  // the last: windows wholly in the padding (y 0, argmax −1, no gradient)
  const cases = [...POOL_CASES, poolGeometry(2, 3, 3, 2, 2, 2, 2, 2, [2, 2, 2, 2])];
  let seed = 1;
  for (const g of cases) await checkPool(gpu, g, randomArray(poolSizes(g).x, seed++), seed++);
});

test('max pooling keeps the first of tied values and lets NaN win, as js does', async (t) => {
  const gpu = await gpuOrSkip(t);
  if (!gpu) return;
  const tied = poolGeometry(2, 7, 9, 3, 3, 3, 2, 2, [1, 1, 1, 1]);
  await checkPool(gpu, tied, withTies(poolSizes(tied).x, 5), 6);
  const overlapping = poolGeometry(1, 6, 6, 2, 3, 3, 1, 1, 'same');
  const x = withTies(poolSizes(overlapping).x, 7);
  x[2 * 6 * 2 + 3 * 2] = Number.NaN;
  x[4 * 6 * 2 + 1 * 2 + 1] = Number.NaN;
  await checkPool(gpu, overlapping, x, 8);
});

test('pooling on views at offsets: x, y and argmax (i32) in one buffer, dy and argmax in another', async (t) => {
  const gpu = await gpuOrSkip(t);
  if (!gpu) return;
  // the first row of windows lies wholly in the padding: argmax −1 (a NaN's bits) beside floats
  const g = poolGeometry(2, 7, 8, 5, 2, 2, 2, 1, [2, 2, 0, 1]);
  const s = poolSizes(g);
  const x = withTies(s.x, 11),
    dy = randomArray(s.y, 12);
  const flatData = new Float32Array(3 + s.x + 2 * s.y + 2).fill(Number.NaN);
  flatData.set(x, 1);
  const flat = gpu.upload(flatData);
  const gx = gpuView(flat, 1, s.x),
    gy = gpuView(flat, 2 + s.x, s.y),
    gArg = gpuView(flat, 3 + s.x + s.y, s.y);
  maxPoolForward(gpu, gx, gy, gArg, g);
  const [y, arg] = await gpu.read(gy, gArg);
  const want = { y: new Float32Array(s.y), arg: new Int32Array(s.y), dx: new Float32Array(s.x) };
  jsBackend.maxPoolForward(x, want.y, want.arg, g);
  assert.ok(want.arg.includes(-1), 'the geometry has windows wholly in the padding');
  assertSameBits(y!, want.y, 'y');
  assertSameBits(asInt(arg!), want.arg, 'argmax');
  // dy and argmax side by side in one read-only buffer; dx at an offset of another
  const backData = new Float32Array(2 * s.y + 1);
  backData.set(dy);
  new Int32Array(backData.buffer).set(want.arg, s.y + 1);
  const back = gpu.upload(backData);
  const dxFlat = gpu.upload(new Float32Array(s.x + 4).fill(Number.NaN));
  maxPoolBackward(gpu, gpuView(back, 0, s.y), gpuView(back, s.y + 1, s.y), gpuView(dxFlat, 3, s.x), g);
  const [dx] = await gpu.read(dxFlat);
  jsBackend.maxPoolBackward(dy, want.arg, want.dx, g);
  assertSameBits(dx!.subarray(3, 3 + s.x), want.dx, 'dx');
  for (const i of [0, 1, 2, 3 + s.x]) assert.ok(Number.isNaN(dx![i]!), `dx buffer [${i}] written`);
});

test('pooling over more threads than 65535 workgroups of 64 (the index spread over y)', async (t) => {
  const gpu = await gpuOrSkip(t);
  if (!gpu) return;
  // a 1×1 window: y = x, element for element, over 4.2M elements
  const g = poolGeometry(1, 1, 65536, 65, 1, 1, 1, 1, 'valid');
  const x = randomArray(poolSizes(g).x, 13);
  const gy = gpu.upload(new Float32Array(x.length).fill(Number.NaN));
  avgPoolForward(gpu, gpu.upload(x), gy, g);
  const [y] = await gpu.read(gy);
  assertSameBits(y!, x, 'y');
});
