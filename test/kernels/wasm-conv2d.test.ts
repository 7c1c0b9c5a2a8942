import { test } from 'node:test';
import { assertClose, randomArray } from '../util/close.ts';
import {
  referenceBackend as ref,
  CONV_CASES,
  convGeometry,
  convSizes,
  describeConv,
  assertConvAdjoint,
} from './reference.ts';
import { wasmBackend, Placer, PLACEMENTS } from './wasmHelpers.ts';
import type { Conv2DGeometry } from '../../src/kernels/convKernels.ts';

const b = await wasmBackend();

/** Tolerance for sums of `terms` products of values in [-1, 1) (float32 accumulation, blocked). */
const tol = (terms: number) => ({ rtol: 1e-5, atol: 3e-6 * (1 + Math.sqrt(terms)) });

// The shared cases plus the network's two layers at a small batch and a few extra odd shapes.
const CASES: Conv2DGeometry[] = [
  ...CONV_CASES,
  convGeometry(2, 13, 13, 32, 3, 3, 64, 1, 1, 'valid'),
  convGeometry(1, 9, 7, 33, 3, 2, 7, 2, 1, [1, 0, 2, 1]),
  convGeometry(1, 6, 6, 8, 1, 1, 65, 1, 1, 'valid'),
];

// Each case also runs with tiny im2col chunks, so chunking (and a short last chunk) is exercised.
const CHUNKS = [undefined, 4096];

function withChunk<T>(bytes: number | undefined, fn: () => T): T {
  if (bytes === undefined) return fn();
  b.tune({ convChunkBytes: bytes });
  try {
    return fn();
  } finally {
    b.tune({ convChunkBytes: 256 * 1024 });
  }
}

test('wasm conv2d forward matches the reference (bias or not, chunked, in and out of wasm memory)', () => {
  CASES.forEach((g, i) => {
    const s = convSizes(g);
    const x = randomArray(s.x, 10 + i),
      w = randomArray(s.w, 20 + i),
      bias = randomArray(g.F, 30 + i);
    for (const withBias of [false, true]) {
      const want = new Float32Array(s.y);
      ref.conv2dForward(x, w, withBias ? bias : null, want, g);
      for (const where of PLACEMENTS)
        for (const chunk of CHUNKS) {
          const p = new Placer(b, where);
          const y = p.f32(new Float32Array(s.y).fill(NaN));
          withChunk(chunk, () => b.conv2dForward(p.f32(x), p.f32(w), withBias ? p.f32(bias) : null, y, g));
          assertClose(y, want, {
            ...tol(g.KH * g.KW * g.C),
            what: `${describeConv(g)} bias=${withBias} ${where} chunk=${chunk} y`,
          });
        }
    }
  });
});

test('wasm conv2d backward data matches the reference and overwrites dx', () => {
  CASES.forEach((g, i) => {
    const s = convSizes(g);
    const w = randomArray(s.w, 40 + i),
      dy = randomArray(s.y, 50 + i);
    const want = new Float32Array(s.x);
    ref.conv2dBackwardData(dy, w, want, g);
    for (const where of PLACEMENTS)
      for (const chunk of CHUNKS) {
        const p = new Placer(b, where);
        const dx = p.f32(new Float32Array(s.x).fill(NaN));
        withChunk(chunk, () => b.conv2dBackwardData(p.f32(dy), p.f32(w), dx, g));
        assertClose(dx, want, { ...tol(g.KH * g.KW * g.F), what: `${describeConv(g)} ${where} chunk=${chunk} dx` });
      }
  });
});

test('wasm conv2d backward filter matches the reference and accumulates dw, db', () => {
  CASES.forEach((g, i) => {
    const s = convSizes(g);
    const x = randomArray(s.x, 60 + i),
      dy = randomArray(s.y, 70 + i);
    const dw0 = randomArray(s.w, 80 + i),
      db0 = randomArray(g.F, 90 + i);
    const wantW = dw0.slice(),
      wantB = db0.slice();
    ref.conv2dBackwardFilter(x, dy, wantW, wantB, g);
    const terms = g.N * g.OH * g.OW;
    for (const where of PLACEMENTS)
      for (const chunk of CHUNKS) {
        const p = new Placer(b, where);
        const dw = p.f32(dw0),
          db = p.f32(db0);
        withChunk(chunk, () => b.conv2dBackwardFilter(p.f32(x), p.f32(dy), dw, db, g));
        assertClose(dw, wantW, { ...tol(terms), what: `${describeConv(g)} ${where} chunk=${chunk} dw` });
        assertClose(db, wantB, { ...tol(terms), what: `${describeConv(g)} ${where} chunk=${chunk} db` });
        const dwOnly = p.f32(dw0);
        withChunk(chunk, () => b.conv2dBackwardFilter(p.f32(x), p.f32(dy), dwOnly, null, g));
        assertClose(dwOnly, wantW, { ...tol(terms), what: `${describeConv(g)} ${where} chunk=${chunk} dw without db` });
      }
  });
});

test('wasm conv2d at the network shapes (batch 64) matches the reference', () => {
  // conv(32, 3×3) on 28×28×1 and conv(64, 3×3) on 13×13×32, as in examples/mnist-small.yaml.
  for (const [i, g] of [
    convGeometry(64, 28, 28, 1, 3, 3, 32, 1, 1, 'valid'),
    convGeometry(64, 13, 13, 32, 3, 3, 64, 1, 1, 'valid'),
  ].entries()) {
    const s = convSizes(g);
    const x = b.alloc(s.x),
      w = b.alloc(s.w),
      dy = b.alloc(s.y);
    x.set(randomArray(s.x, 200 + i));
    w.set(randomArray(s.w, 210 + i));
    dy.set(randomArray(s.y, 220 + i));
    const y = b.alloc(s.y),
      want = new Float32Array(s.y);
    b.conv2dForward(x, w, null, y, g);
    ref.conv2dForward(x, w, null, want, g);
    assertClose(y, want, { ...tol(g.KH * g.KW * g.C), what: `${describeConv(g)} y` });
    const dw = b.alloc(s.w),
      wantW = new Float32Array(s.w);
    b.conv2dBackwardFilter(x, dy, dw, null, g);
    ref.conv2dBackwardFilter(x, dy, wantW, null, g);
    assertClose(dw, wantW, { ...tol(g.N * g.OH * g.OW), what: `${describeConv(g)} dw` });
    const dx = b.alloc(s.x),
      wantX = new Float32Array(s.x);
    b.conv2dBackwardData(dy, w, dx, g);
    ref.conv2dBackwardData(dy, w, wantX, g);
    assertClose(dx, wantX, { ...tol(g.KH * g.KW * g.F), what: `${describeConv(g)} dx` });
  }
});

test('wasm conv2d backward passes satisfy the adjoint identity of the forward', () => {
  assertConvAdjoint(b, CASES, randomArray);
});
