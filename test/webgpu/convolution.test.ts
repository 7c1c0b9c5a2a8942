/**
 * The webgpu convolution kernels against the js backend on every shape of CONV_CASES
 * (test/kernels/reference.ts: odd sizes, channels 1, 3, 5, 7, strides 1–3, 'valid', 'same' and
 * asymmetric padding, kernels larger than the image, 1×1, F = 65 across the 64-wide tile, and a
 * filter gradient deep enough to be split over workgroups), with and without bias, the gradients
 * accumulated onto non-zero dw and db; then every array a view at an offset (w and bias in one
 * buffer, dw and db in another, as a model's flat parameters and gradients), and a product spread
 * over several dispatches. Tolerance: rtol 1e-5 and atol 2e-6·(1 + √terms) for a
 * sum of `terms` products of values in [−1, 1), as the js convolution's own test.
 */
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { jsBackend } from '../../src/kernels/js/index.ts';
import { conv2dBackwardData, conv2dBackwardFilter, conv2dForward } from '../../src/kernels/webgpu/convolution.ts';
import { gpuView } from '../../src/kernels/webgpu/gpuArray.ts';
import { assertClose, randomArray } from '../util/close.ts';
import { CONV_CASES, convGeometry, convSizes, describeConv } from '../kernels/reference.ts';
import { gpuOrSkip, releaseGpu } from './gpuTest.ts';

after(releaseGpu);

const tol = (terms: number) => ({ rtol: 1e-5, atol: 2e-6 * (1 + Math.sqrt(terms)) });

test('conv2d forward, backward data and backward filter equal the js backend on every shape', async (t) => {
  const gpu = await gpuOrSkip(t);
  if (!gpu) return;
  let seed = 1;
  for (const g of CONV_CASES) {
    const s = convSizes(g);
    const P = g.N * g.OH * g.OW;
    const what = describeConv(g);
    const x = randomArray(s.x, seed++),
      w = randomArray(s.w, seed++),
      b = randomArray(g.F, seed++),
      dy = randomArray(s.y, seed++),
      dw0 = randomArray(s.w, seed++),
      db0 = randomArray(g.F, seed++);
    const gx = gpu.upload(x),
      gw = gpu.upload(w),
      gb = gpu.upload(b),
      gdy = gpu.upload(dy);
    const gy = gpu.upload(new Float32Array(s.y).fill(Number.NaN)),
      gyBias = gpu.upload(new Float32Array(s.y).fill(Number.NaN)),
      gdx = gpu.upload(new Float32Array(s.x).fill(Number.NaN)),
      gdw = gpu.upload(dw0),
      gdb = gpu.upload(db0);
    conv2dForward(gpu, gx, gw, null, gy, g);
    conv2dForward(gpu, gx, gw, gb, gyBias, g);
    conv2dBackwardData(gpu, gdy, gw, gdx, g);
    conv2dBackwardFilter(gpu, gx, gdy, gdw, gdb, g);
    const [y, yBias, dx, dw, db] = await gpu.read(gy, gyBias, gdx, gdw, gdb);
    const want = {
      y: new Float32Array(s.y),
      yBias: new Float32Array(s.y),
      dx: new Float32Array(s.x),
      dw: dw0.slice(),
      db: db0.slice(),
    };
    jsBackend.conv2dForward(x, w, null, want.y, g);
    jsBackend.conv2dForward(x, w, b, want.yBias, g);
    jsBackend.conv2dBackwardData(dy, w, want.dx, g);
    jsBackend.conv2dBackwardFilter(x, dy, want.dw, want.db, g);
    assertClose(y!, want.y, { ...tol(g.KH * g.KW * g.C), what: `${what} y` });
    assertClose(yBias!, want.yBias, { ...tol(g.KH * g.KW * g.C + 1), what: `${what} y with bias` });
    assertClose(dx!, want.dx, { ...tol(g.KH * g.KW * g.F), what: `${what} dx` });
    assertClose(dw!, want.dw, { ...tol(P + 1), what: `${what} dw` });
    assertClose(db!, want.db, { ...tol(P + 1), what: `${what} db` });
  }
});

test('conv2d on views at offsets: w and bias in one parameter buffer, dw and db in one gradient buffer', async (t) => {
  const gpu = await gpuOrSkip(t);
  if (!gpu) return;
  // stride 2, 'same' padding, C = 3 and F = 5: every gather's edge at once
  const g = convGeometry(3, 9, 8, 3, 3, 3, 5, 2, 2, 'same');
  const s = convSizes(g);
  const P = g.N * g.OH * g.OW;
  const x = randomArray(s.x, 90),
    dy = randomArray(s.y, 91),
    params = randomArray(5 + s.w + 1 + g.F, 92),
    grads0 = randomArray(2 + s.w + 3 + g.F, 93);
  const w = params.subarray(5, 5 + s.w),
    b = params.subarray(6 + s.w);
  const gParams = gpu.upload(params),
    gGrads = gpu.upload(grads0),
    gOut = gpu.upload(new Float32Array(4 + s.y + 6 + s.x + 2).fill(Number.NaN));
  const gx = gpuView(gpu.upload(new Float32Array([9, ...x])), 1, s.x),
    gdy = gpuView(gpu.upload(new Float32Array([9, 9, 9, ...dy])), 3, s.y),
    gw = gpuView(gParams, 5, s.w),
    gb = gpuView(gParams, 6 + s.w, g.F);
  const gy = gpuView(gOut, 4, s.y),
    gdx = gpuView(gOut, 10 + s.y, s.x),
    gdw = gpuView(gGrads, 2, s.w),
    gdb = gpuView(gGrads, 5 + s.w, g.F);
  conv2dForward(gpu, gx, gw, gb, gy, g);
  conv2dBackwardData(gpu, gdy, gw, gdx, g);
  conv2dBackwardFilter(gpu, gx, gdy, gdw, gdb, g);
  const [out, grads] = await gpu.read(gOut, gGrads);
  const y = new Float32Array(s.y),
    dx = new Float32Array(s.x),
    wantGrads = grads0.slice();
  jsBackend.conv2dForward(x, w, b, y, g);
  jsBackend.conv2dBackwardData(dy, w, dx, g);
  jsBackend.conv2dBackwardFilter(x, dy, wantGrads.subarray(2, 2 + s.w), wantGrads.subarray(5 + s.w), g);
  const what = describeConv(g);
  assertClose(out!.subarray(4, 4 + s.y), y, { ...tol(g.KH * g.KW * g.C + 1), what: `${what} y` });
  assertClose(out!.subarray(10 + s.y, 10 + s.y + s.x), dx, { ...tol(g.KH * g.KW * g.F), what: `${what} dx` });
  assertClose(grads!, wantGrads, { ...tol(P + 1), what: `${what} dw, db and the floats around them` });
  // the output buffer's floats outside y and dx were not written
  for (const i of [0, 3, 4 + s.y, 9 + s.y, 10 + s.y + s.x])
    assert.ok(Number.isNaN(out![i]!), `output buffer [${i}] written`);
});

test('the forward product spread over several dispatches (64 pixels each) equals one', async (t) => {
  const gpu = await gpuOrSkip(t);
  if (!gpu) return;
  const g = convGeometry(2, 13, 11, 3, 3, 3, 70, 1, 1, 'same');
  const s = convSizes(g);
  const x = randomArray(s.x, 7),
    w = randomArray(s.w, 8);
  const want = new Float32Array(s.y);
  jsBackend.conv2dForward(x, w, null, want, g);
  const gy = gpu.upload(new Float32Array(s.y).fill(Number.NaN));
  conv2dForward(gpu, gpu.upload(x), gpu.upload(w), null, gy, g, 64);
  const [y] = await gpu.read(gy);
  assertClose(y!, want, {
    ...tol(g.KH * g.KW * g.C),
    what: `${describeConv(g)} y in ${Math.ceil((g.N * g.OH * g.OW) / 64)} dispatches`,
  });
});
