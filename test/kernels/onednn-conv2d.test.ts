// The onednn backend's convolutions (oneDNN convolution primitives on NHWC memory, weights reordered
// to oneDNN's own format) against the reference: the shared odd shapes (strides 1–3, TF-'same',
// asymmetric and negative implied padding, kernels larger than the image, 1×1) and the network's
// own, with operands in wasm memory, at offsets into SharedArrayBuffers and in plain arrays. Also:
// dw/db accumulate, dx is overwritten, the adjoint identity, bad input, and that oneDNN ran every
// case itself with its direct kernels (not its im2col + gemm fallback) at the network shapes.
// Skipped when the addon is not built.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { assertClose, randomArray } from '../util/close.ts';
import { referenceBackend as ref, CONV_CASES, convGeometry, convSizes, describeConv, assertConvAdjoint } from './reference.ts';
import { createOneDnnBackend, onednnUnavailableReason } from '../../src/kernels/onednn/index.ts';
import type { Conv2DGeometry } from '../../src/kernels/backend.ts';

const onednn = await createOneDnnBackend();
const skip = onednn ? false : `onednn backend unavailable: ${onednnUnavailableReason()}`;
const b = onednn!;

/** Tolerance for sums of `terms` products of values in [-1, 1) (float32 accumulation, blocked). */
const tol = (terms: number) => ({ rtol: 1e-5, atol: 3e-6 * (1 + Math.sqrt(terms)) });
/**
 * Tolerance of the filter and bias gradients, sums over N·OH·OW pixels: oneDNN's backward-weights
 * kernels add them in float32 along long chains (the OpenBLAS backend's gemm blocks them more
 * finely), so rounding grows like eps·√terms times the partial sums, which reach tens at batch 64.
 */
const sumTol = (terms: number) => ({ rtol: 1e-5, atol: 1e-5 * (1 + Math.sqrt(terms)) });

const CASES: Conv2DGeometry[] = [
  ...CONV_CASES,
  convGeometry(2, 13, 13, 32, 3, 3, 64, 1, 1, 'valid'),
  convGeometry(1, 9, 7, 33, 3, 2, 7, 2, 1, [1, 0, 2, 1]),
  convGeometry(1, 6, 6, 8, 1, 1, 65, 1, 1, 'valid'),
  convGeometry(3, 7, 5, 129, 2, 2, 1, 1, 1, 'same'),
  // implied padding after the image is negative: the last row and column are never read
  convGeometry(2, 8, 9, 3, 3, 3, 4, 2, 2, 'valid'),
];

type Placement = 'wasm' | 'sab+3' | 'js' | 'mixed';
const PLACEMENTS: readonly Placement[] = ['wasm', 'sab+3', 'js', 'mixed'];

/** Places copies of arrays: in wasm memory, at float offset 3 of a SharedArrayBuffer, plain, or alternating. */
class Placer {
  private n = 0;
  constructor(private readonly where: Placement) {}
  f32(a: ArrayLike<number>): Float32Array {
    const kinds: Placement[] = ['wasm', 'sab+3', 'js'];
    const w = this.where === 'mixed' ? kinds[this.n++ % 3]! : this.where;
    const out = w === 'wasm' ? b.alloc(a.length)
      : w === 'sab+3' ? new Float32Array(new SharedArrayBuffer((a.length + 4) * 4), 12, a.length)
        : new Float32Array(a.length);
    out.set(a);
    return out;
  }
}

test('onednn conv2d forward matches the reference (bias or not, every placement)', { skip }, () => {
  CASES.forEach((g, i) => {
    const s = convSizes(g);
    const x = randomArray(s.x, 10 + i), w = randomArray(s.w, 20 + i), bias = randomArray(g.F, 30 + i);
    for (const withBias of [false, true]) {
      const want = new Float32Array(s.y);
      ref.conv2dForward(x, w, withBias ? bias : null, want, g);
      for (const where of PLACEMENTS) {
        const p = new Placer(where);
        const y = p.f32(new Float32Array(s.y).fill(NaN));
        b.conv2dForward(p.f32(x), p.f32(w), withBias ? p.f32(bias) : null, y, g);
        assertClose(y, want, { ...tol(g.KH * g.KW * g.C), what: `${describeConv(g)} bias=${withBias} ${where} y` });
      }
    }
  });
});

test('onednn conv2d backward data matches the reference and overwrites dx', { skip }, () => {
  CASES.forEach((g, i) => {
    const s = convSizes(g);
    const w = randomArray(s.w, 40 + i), dy = randomArray(s.y, 50 + i);
    const want = new Float32Array(s.x);
    ref.conv2dBackwardData(dy, w, want, g);
    for (const where of PLACEMENTS) {
      const p = new Placer(where);
      const dx = p.f32(new Float32Array(s.x).fill(NaN));
      b.conv2dBackwardData(p.f32(dy), p.f32(w), dx, g);
      assertClose(dx, want, { ...tol(g.KH * g.KW * g.F), what: `${describeConv(g)} ${where} dx` });
    }
  });
});

test('onednn conv2d backward filter matches the reference and accumulates dw, db', { skip }, () => {
  CASES.forEach((g, i) => {
    const s = convSizes(g);
    const x = randomArray(s.x, 60 + i), dy = randomArray(s.y, 70 + i);
    const dw0 = randomArray(s.w, 80 + i), db0 = randomArray(g.F, 90 + i);
    const wantW = dw0.slice(), wantB = db0.slice();
    ref.conv2dBackwardFilter(x, dy, wantW, wantB, g);
    const terms = g.N * g.OH * g.OW;
    for (const where of PLACEMENTS) {
      const p = new Placer(where);
      const dw = p.f32(dw0), db = p.f32(db0);
      b.conv2dBackwardFilter(p.f32(x), p.f32(dy), dw, db, g);
      assertClose(dw, wantW, { ...sumTol(terms), what: `${describeConv(g)} ${where} dw` });
      assertClose(db, wantB, { ...sumTol(terms), what: `${describeConv(g)} ${where} db` });
      const dwOnly = p.f32(dw0);
      b.conv2dBackwardFilter(p.f32(x), p.f32(dy), dwOnly, null, g);
      assertClose(dwOnly, wantW, { ...sumTol(terms), what: `${describeConv(g)} ${where} dw without db` });
    }
  });
  const stats = b.stats();
  for (const kind of ['convForward', 'convBackwardData', 'convBackwardWeights'] as const) {
    assert.equal(stats[kind].unsupported, 0, `${kind}: every case ran as a oneDNN primitive`);
  }
});

/** conv(32, 3×3) on 28×28×1 and conv(64, 3×3) on 13×13×32, as in examples/mnist-small.yaml. */
const network = (N: number) => [convGeometry(N, 28, 28, 1, 3, 3, 32, 1, 1, 'valid'), convGeometry(N, 13, 13, 32, 3, 3, 64, 1, 1, 'valid')];

test('onednn conv2d at the network shapes matches the reference', { skip }, () => {
  // batch 16 keeps the float64 reference quick; batch 64's plans are checked below
  for (const [i, g] of network(16).entries()) {
    const s = convSizes(g);
    const x = b.alloc(s.x), w = b.alloc(s.w), dy = b.alloc(s.y), bias = b.alloc(g.F);
    x.set(randomArray(s.x, 200 + i)); w.set(randomArray(s.w, 210 + i)); dy.set(randomArray(s.y, 220 + i)); bias.set(randomArray(g.F, 230 + i));
    const y = b.alloc(s.y), want = new Float32Array(s.y);
    b.conv2dForward(x, w, bias, y, g);
    ref.conv2dForward(x, w, bias, want, g);
    assertClose(y, want, { ...tol(g.KH * g.KW * g.C), what: `${describeConv(g)} y` });
    const dw = b.alloc(s.w), wantW = new Float32Array(s.w), db = b.alloc(g.F), wantB = new Float32Array(g.F);
    b.conv2dBackwardFilter(x, dy, dw, db, g);
    ref.conv2dBackwardFilter(x, dy, wantW, wantB, g);
    assertClose(dw, wantW, { ...sumTol(g.N * g.OH * g.OW), what: `${describeConv(g)} dw` });
    assertClose(db, wantB, { ...sumTol(g.N * g.OH * g.OW), what: `${describeConv(g)} db` });
    const dx = b.alloc(s.x), wantX = new Float32Array(s.x);
    b.conv2dBackwardData(dy, w, dx, g);
    ref.conv2dBackwardData(dy, w, wantX, g);
    assertClose(dx, wantX, { ...tol(g.KH * g.KW * g.F), what: `${describeConv(g)} dx` });
  }
});

// oneDNN 2.6 has direct NHWC kernels for all three passes with AVX-512; elsewhere it may rightly choose others.
const avx512 = onednn?.onednn.isa.startsWith('avx512') ? false : `oneDNN dispatches ${onednn?.onednn.isa} here; the kernel choice is checked on AVX-512 machines`;

test('onednn conv2d at the network shapes (batch 64) runs oneDNN\'s direct kernels, not its im2col + gemm one', { skip: skip || avx512 }, () => {
  for (const g of network(64)) {
    const s = convSizes(g);
    const x = b.alloc(s.x), w = b.alloc(s.w), dy = b.alloc(s.y), y = b.alloc(s.y), dx = b.alloc(s.x), dw = b.alloc(s.w), db = b.alloc(g.F);
    b.conv2dForward(x, w, db, y, g);
    b.conv2dBackwardData(dy, w, dx, g);
    b.conv2dBackwardFilter(x, dy, dw, db, g);
    const stats = b.stats();
    for (const kind of ['convForward', 'convBackwardData', 'convBackwardWeights'] as const) {
      assert.doesNotMatch(stats[kind].impl, /gemm|ref/, `${describeConv(g)} ${kind} ran ${stats[kind].impl}`);
    }
  }
});

test('onednn conv2d backward passes satisfy the adjoint identity of the forward', { skip }, () => {
  assertConvAdjoint(b, CASES, randomArray);
});

test('onednn conv2d rejects short operands and bad geometry before touching memory', { skip }, () => {
  const g = convGeometry(2, 7, 7, 3, 3, 3, 5, 1, 1, 'valid');
  const s = convSizes(g);
  const f = (n: number) => new Float32Array(n);
  assert.throws(() => b.conv2dForward(f(s.x - 1), f(s.w), null, f(s.y), g), /conv2dForward: x has \d+ values, needs \d+/);
  assert.throws(() => b.conv2dForward(f(s.x), f(s.w), f(g.F - 1), f(s.y), g), /bias has 4 values, needs 5/);
  assert.throws(() => b.conv2dBackwardData(f(s.y), f(s.w), f(s.x - 1), g), /conv2dBackwardData: dx has/);
  assert.throws(() => b.conv2dBackwardFilter(f(s.x), f(s.y), f(s.w), f(1), g), /conv2dBackwardFilter: db has 1 values, needs 5/);
  assert.throws(() => b.conv2dForward(f(s.x), f(s.w), null, f(s.y), { ...g, strideH: 0 }), /strides must be >= 1/);
  assert.throws(() => b.conv2dForward(f(s.x), f(s.w), null, f(s.y), { ...g, padTop: -1 }), /geometry field padTop must be a non-negative integer/);
  assert.throws(() => b.conv2dForward(f(s.x), f(s.w), null, f(s.y), { ...g, OH: 1e10 }), /geometry field OH/);
});

test('onednn conv2d with an empty window (C = 0) gives the bias, and its backward passes leave dw empty', { skip }, () => {
  const g: Conv2DGeometry = { N: 2, H: 3, W: 3, C: 0, KH: 3, KW: 3, F: 4, strideH: 1, strideW: 1, padTop: 1, padLeft: 1, OH: 3, OW: 3 };
  const none = new Float32Array(0), bias = Float32Array.of(1, 2, 3, 4);
  for (const withBias of [true, false]) {
    const y = new Float32Array(2 * 9 * 4).fill(NaN), want = new Float32Array(2 * 9 * 4);
    b.conv2dForward(none, none, withBias ? bias : null, y, g);
    ref.conv2dForward(none, none, withBias ? bias : null, want, g);
    assert.deepEqual([...y], [...want]);
  }
  const dy = randomArray(2 * 9 * 4, 5), db = Float32Array.of(1, 1, 1, 1), wantB = db.slice();
  b.conv2dBackwardFilter(none, dy, none, db, g);
  ref.conv2dBackwardFilter(none, dy, none, wantB, g);
  assertClose(db, wantB, { what: 'db' });
  b.conv2dBackwardData(dy, none, none, g);
});
