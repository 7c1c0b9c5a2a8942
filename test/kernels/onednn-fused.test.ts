// The onednn backend's fused kernels (native/onednn/convpool.c, direct.c) against the unfused calls
// and the reference: conv2dForwardActivation equals conv2dForward then activationForward bit for
// bit (the addon's own kernel and oneDNN's post-op alike, NaN included); convPoolForward gives the
// pool's output and argmax exactly as conv2dForwardActivation then maxPoolForward do, and the
// reference's within float32 rounding; conv2dBackwardFilterPooled adds what conv2dBackwardFilter of
// the scattered gradient (maxPoolBackward) adds. Shapes: mnist-small's and alexnet-small's first layers, padding,
// strides, filters not a multiple of 16, windows 2×2, 3×3 and 1×2, unused last rows and columns;
// relu, clipped relu and none. Skipped when the addon is not built or the CPU has no AVX-512 (then
// the fused calls decline and the model runs its layers one by one).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { assertClose, randomArray } from '../util/close.ts';
import { referenceBackend as ref, convGeometry, convSizes, describeConv, poolGeometry } from './reference.ts';
import { createOneDnnBackend, onednnUnavailableReason, type OneDnnBackend } from '../../src/kernels/onednn/index.ts';
import type { WasmBackend } from '../../src/kernels/wasm/index.ts';
import type { ActivationKind } from '../../src/kernels/activation.ts';
import type { Conv2DGeometry } from '../../src/kernels/convKernels.ts';
import type { Pool2DGeometry } from '../../src/kernels/poolKernels.ts';

const onednn = await createOneDnnBackend();
const b = onednn as OneDnnBackend & WasmBackend;
const skip = !onednn
  ? `onednn backend unavailable: ${onednnUnavailableReason()}`
  : !onednn.onednn.isa.startsWith('avx512')
    ? `no AVX-512 here (${onednn.onednn.isa}): the addon's own kernels decline`
    : false;

/** A convolution and the max pool over its output with windows KH×KW, stride = window, no padding. */
function pair(g: Conv2DGeometry, KH: number, KW: number): Pool2DGeometry {
  return poolGeometry(g.N, g.OH, g.OW, g.F, KH, KW, KH, KW, 'valid');
}

const PAIRS: [Conv2DGeometry, number, number][] = [
  [convGeometry(4, 28, 28, 1, 3, 3, 32, 1, 1, 'valid'), 2, 2], // mnist-small's first layer
  [convGeometry(2, 28, 28, 1, 5, 5, 32, 1, 1, 'same'), 2, 2], // alexnet-small's: the edge windows reach into the padding
  [convGeometry(2, 11, 13, 3, 3, 3, 7, 1, 1, 'same'), 2, 2], // odd sizes: the last row and column unused
  [convGeometry(3, 9, 9, 2, 2, 2, 40, 1, 1, 'valid'), 3, 3], // 40 filters: a block of 32 and a tail of 8
  [convGeometry(2, 12, 10, 1, 3, 3, 16, 2, 1, [1, 0, 1, 2]), 1, 2],
  [convGeometry(1, 8, 8, 4, 3, 3, 5, 1, 1, 'same'), 2, 2],
];
const KINDS: [ActivationKind, number | undefined][] = [
  ['relu', undefined],
  ['clippedRelu', 0.4],
  ['linear', undefined],
];

test('onednn conv2dForwardActivation equals conv2dForward then activationForward, bit for bit (NaN included)', {
  skip,
}, () => {
  const cases = [
    ...PAIRS.map(([g]) => g),
    convGeometry(2, 9, 9, 32, 3, 3, 64, 1, 1, 'valid'),
    convGeometry(1, 7, 8, 16, 3, 3, 33, 2, 1, 'same'),
  ];
  cases.forEach((g, i) => {
    const s = convSizes(g);
    const x = randomArray(s.x, 1 + i),
      w = randomArray(s.w, 2 + i),
      bias = randomArray(g.F, 3 + i);
    x[i] = NaN;
    for (const [kind, cap] of KINDS.filter(([k]) => k !== 'linear'))
      for (const own of [true, false]) {
        const before = b.setDirect(own);
        try {
          const fused = b.alloc(s.y),
            apart = b.alloc(s.y);
          assert.equal(
            b.conv2dForwardActivation!(kind, x, w, bias, fused, g, cap),
            true,
            `${describeConv(g)} ${kind} fused`,
          );
          b.conv2dForward(x, w, bias, apart, g);
          b.activationForward(kind, apart, apart, cap);
          assert.deepEqual([...fused], [...apart], `${describeConv(g)} ${kind} own kernels ${own}`);
        } finally {
          b.setDirect(before);
        }
      }
  });
  assert.equal(
    b.conv2dForwardActivation!(
      'tanh',
      new Float32Array(1),
      new Float32Array(1),
      null,
      new Float32Array(1),
      convGeometry(1, 1, 1, 1, 1, 1, 1, 1, 1, 'valid'),
    ),
    false,
    'tanh is not fused: the caller runs two calls',
  );
});

test("onednn convPoolForward gives maxPoolForward of the activated convolution exactly, and the reference's", {
  skip,
}, () => {
  PAIRS.forEach(([g, KH, KW], i) => {
    const q = pair(g, KH, KW),
      s = convSizes(g),
      out = q.N * q.OH * q.OW * q.C;
    const x = randomArray(s.x, 10 + i),
      w = randomArray(s.w, 20 + i),
      bias = randomArray(g.F, 30 + i);
    for (const [kind, cap] of KINDS) {
      const what = `${describeConv(g)} pool ${KH}×${KW} ${kind}`;
      const y = b.alloc(out).fill(NaN),
        am = b.allocInt32(out).fill(-7);
      const before = b.stats().convForward.direct;
      assert.equal(b.convPoolForward!(kind, x, w, bias, y, am, g, q, cap), true, `${what}: fused`);
      assert.equal(b.stats().convForward.direct, before + 1, `${what}: the addon's kernel ran`);
      // the same float32 sums as the addon's convolution kernel, then oneDNN's own pooling
      const z = b.alloc(s.y),
        wy = b.alloc(out),
        wam = b.allocInt32(out);
      b.conv2dForward(x, w, bias, z, g);
      if (kind !== 'linear') b.activationForward(kind, z, z, cap);
      b.maxPoolForward(z, wy, wam, q);
      assert.deepEqual([...y], [...wy], `${what} y`);
      assert.deepEqual([...am], [...wam], `${what} argmax`);
      // and the float64 reference
      const rz = new Float32Array(s.y),
        ry = new Float32Array(out),
        ram = new Int32Array(out);
      ref.conv2dForward(x, w, bias, rz, g);
      if (kind !== 'linear') ref.activationForward(kind, rz, rz, cap);
      ref.maxPoolForward(rz, ry, ram, q);
      assertClose(y, ry, {
        rtol: 1e-5,
        atol: 3e-6 * (1 + Math.sqrt(g.KH * g.KW * g.C)),
        what: `${what} y against the reference`,
      });
    }
  });
});

test('onednn conv2dBackwardFilterPooled adds conv2dBackwardFilter of the pooled gradient scattered through argmax', {
  skip,
}, () => {
  PAIRS.forEach(([g, KH, KW], i) => {
    const q = pair(g, KH, KW),
      s = convSizes(g),
      out = q.N * q.OH * q.OW * q.C;
    const x = randomArray(s.x, 40 + i),
      w = randomArray(s.w, 50 + i),
      dyPool = randomArray(out, 60 + i);
    const y = b.alloc(out),
      am = b.allocInt32(out);
    b.convPoolForward!('relu', x, w, null, y, am, g, q);
    const dw0 = randomArray(s.w, 70 + i),
      db0 = randomArray(g.F, 80 + i);
    for (const withBias of [true, false]) {
      const dw = dw0.slice(),
        db = db0.slice();
      assert.equal(
        b.conv2dBackwardFilterPooled!(x, dyPool, am, dw, withBias ? db : null, g, q),
        true,
        `${describeConv(g)} fused`,
      );
      const dz = new Float32Array(s.y),
        wantW = dw0.slice(),
        wantB = db0.slice();
      ref.maxPoolBackward(dyPool, am, dz, q);
      ref.conv2dBackwardFilter(x, dz, wantW, withBias ? wantB : null, g);
      const tol = { rtol: 1e-5, atol: 1e-5 * (1 + Math.sqrt(g.N * g.OH * g.OW)) };
      assertClose(dw, wantW, { ...tol, what: `${describeConv(g)} dw` });
      assertClose(db, withBias ? wantB : db0, { ...tol, what: `${describeConv(g)} db (bias ${withBias})` });
    }
  });
});

test("onednn conv2dBackwardFilterPooled through the activation equals activationBackward on the pool's output first, bit for bit", {
  skip,
}, () => {
  PAIRS.forEach(([g, KH, KW], i) => {
    const q = pair(g, KH, KW),
      s = convSizes(g),
      out = q.N * q.OH * q.OW * q.C;
    const x = randomArray(s.x, 90 + i),
      w = randomArray(s.w, 91 + i),
      dyPool = randomArray(out, 92 + i);
    for (const [kind, cap] of KINDS.filter(([k]) => k !== 'linear')) {
      const y = b.alloc(out),
        am = b.allocInt32(out);
      b.convPoolForward!(kind, x, w, null, y, am, g, q, cap);
      const dw = new Float32Array(s.w),
        db = new Float32Array(g.F),
        wantW = new Float32Array(s.w),
        wantB = new Float32Array(g.F);
      assert.equal(
        b.conv2dBackwardFilterPooled!(x, dyPool, am, dw, db, g, q, { kind, y, cap }),
        true,
        `${describeConv(g)} ${kind} through`,
      );
      const dyAct = new Float32Array(out);
      b.activationBackward(kind, y, dyPool, dyAct, cap);
      b.conv2dBackwardFilterPooled!(x, dyAct, am, wantW, wantB, g, q);
      assert.deepEqual([...dw], [...wantW], `${describeConv(g)} ${kind} dw`);
      assert.deepEqual([...db], [...wantB], `${describeConv(g)} ${kind} db`);
    }
  });
  const g = PAIRS[0]![0],
    q = pair(g, 2, 2),
    out = q.N * q.OH * q.OW * q.C;
  assert.equal(
    b.conv2dBackwardFilterPooled!(
      new Float32Array(g.N * g.H * g.W),
      new Float32Array(out),
      new Int32Array(out),
      new Float32Array(9 * g.F),
      null,
      g,
      q,
      { kind: 'tanh', y: new Float32Array(out) },
    ),
    false,
    'tanh is not applied inside: the caller runs activationBackward',
  );
});

test('onednn fused calls decline (writing nothing) where they do not apply: overlapping or padded windows, many channels, own kernels off', {
  skip,
}, () => {
  const g = convGeometry(2, 10, 10, 1, 3, 3, 8, 1, 1, 'valid'),
    s = convSizes(g);
  const x = randomArray(s.x, 1),
    w = randomArray(s.w, 2);
  const declines = (q: Pool2DGeometry, conv = g) => {
    const out = q.N * q.OH * q.OW * q.C,
      y = new Float32Array(out).fill(7),
      am = new Int32Array(out);
    const xs = randomArray(conv.N * conv.H * conv.W * conv.C, 3),
      ws = randomArray(conv.KH * conv.KW * conv.C * conv.F, 4);
    assert.equal(b.convPoolForward!('relu', xs, ws, null, y, am, conv, q), false, JSON.stringify(q));
    assert.ok(
      y.every((v) => v === 7),
      'nothing written',
    );
    assert.equal(b.conv2dBackwardFilterPooled!(xs, y, am, new Float32Array(ws.length), null, conv, q), false);
  };
  declines(poolGeometry(2, 8, 8, 8, 3, 3, 2, 2, 'valid')); // overlapping windows
  declines(poolGeometry(2, 8, 8, 8, 2, 2, 2, 2, [1, 1, 0, 0])); // padding
  const wide = convGeometry(2, 6, 6, 16, 3, 3, 8, 1, 1, 'valid');
  declines(poolGeometry(2, 4, 4, 8, 2, 2, 2, 2, 'valid'), wide); // 16 input channels: oneDNN's kernels
  const before = b.setDirect(false);
  try {
    declines(pair(g, 2, 2));
  } finally {
    b.setDirect(before);
  }
  assert.equal(x.length, s.x);
  assert.equal(w.length, s.w);
});

// the tiled max-pool backward (native/onednn/direct.c) has AVX-512 and AVX2 versions
const tiledSkip = !onednn
  ? `onednn backend unavailable: ${onednnUnavailableReason()}`
  : !/^avx(2|512)/.test(onednn.onednn.isa)
    ? `neither AVX-512 nor AVX2 here (${onednn.onednn.isa}): max-pool backward scatters`
    : false;

test('onednn maxPoolBackward refuses an argmax outside its window (the tiled path compares, never scatters)', {
  skip: tiledSkip,
}, () => {
  const q = poolGeometry(1, 4, 4, 1, 2, 2, 2, 2, 'valid');
  // output 0's window holds cells 0, 1, 4, 5; cell 2 is in output 1's window
  assert.throws(
    () => b.maxPoolBackward(Float32Array.of(1, 1, 1, 1), Int32Array.of(2, 2, 8, 10), new Float32Array(16), q),
    /argmax holds an index outside its window/,
  );
});
