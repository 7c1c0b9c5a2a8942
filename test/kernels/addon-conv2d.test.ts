// Convolutions of the backends with an addon, one test per check run on each of them: native (im2col
// + OpenBLAS sgemm, also with tiny im2col chunks so chunking is exercised) and onednn (oneDNN
// convolution primitives on NHWC memory with weights reordered to oneDNN's own format, and the
// addon's AVX-512 kernels for few input channels, native/onednn/direct.c — each onednn case runs
// both ways). Against the reference: the shared odd shapes (strides 1–3, TF-'same', asymmetric and
// negative implied padding, kernels larger than the image, 1×1, filters not a multiple of 16) and
// the network's own, with operands in wasm memory, at offsets into SharedArrayBuffers and in plain
// arrays. Also: dw/db accumulate, dx is overwritten, the adjoint identity, bad input, an empty
// window, and which kernels onednn ran. A backend whose addon is not built skips its runs.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { assertClose, randomArray } from '../util/close.ts';
import {
  referenceBackend as ref,
  CONV_CASES,
  convGeometry,
  convSizes,
  describeConv,
  assertConvAdjoint,
} from './reference.ts';
import { createNativeBackend, nativeUnavailableReason, type NativeBackend } from '../../src/kernels/native/index.ts';
import { createOneDnnBackend, onednnUnavailableReason } from '../../src/kernels/onednn/index.ts';
import type { Backend } from '../../src/kernels/backend.ts';
import type { Conv2DGeometry } from '../../src/kernels/convKernels.ts';

const native = await createNativeBackend();
const onednn = await createOneDnnBackend();
const nativeSkip = native ? false : `native backend unavailable: ${nativeUnavailableReason()}`;
const onednnSkip = onednn ? false : `onednn backend unavailable: ${onednnUnavailableReason()}`;

/** Tolerance for sums of `terms` products of values in [-1, 1) (float32 accumulation, blocked). */
const tol = (terms: number) => ({ rtol: 1e-5, atol: 3e-6 * (1 + Math.sqrt(terms)) });
/**
 * Tolerance of onednn's filter and bias gradients, sums over N·OH·OW pixels: oneDNN's
 * backward-weights kernels add them in float32 along long chains (the OpenBLAS backend's gemm
 * blocks them more finely), so rounding grows like eps·√terms times the partial sums, which reach
 * tens at batch 64.
 */
const sumTol = (terms: number) => ({ rtol: 1e-5, atol: 1e-5 * (1 + Math.sqrt(terms)) });

/**
 * One backend and the modes each check runs in (`run` wraps a check in a mode: native's im2col
 * chunk, onednn's own kernels on or off), its filter-gradient tolerance, and the batch of the
 * network-shape check (onednn's plans at batch 64 are checked on their own below).
 */
interface Variant {
  name: string;
  b: Backend | null;
  skip: string | false;
  modes: { name: string; run<T>(fn: () => T): T }[];
  filterTol: (terms: number) => { rtol: number; atol: number };
  networkBatch: number;
}

function nativeChunk(bytes: number | undefined) {
  return {
    name: `chunk=${bytes ?? 'default'}`,
    run<T>(fn: () => T): T {
      if (bytes === undefined) return fn();
      (native as NativeBackend).setConvChunkBytes(bytes);
      try {
        return fn();
      } finally {
        (native as NativeBackend).setConvChunkBytes(1 << 20);
      }
    },
  };
}

function onednnDirect(on: boolean) {
  return {
    name: on ? 'own kernels' : 'oneDNN only',
    run<T>(fn: () => T): T {
      const before = onednn!.setDirect(on);
      try {
        return fn();
      } finally {
        onednn!.setDirect(before);
      }
    },
  };
}

const VARIANTS: Variant[] = [
  // each case also runs with 4 KiB im2col chunks (a few rows each, a short last chunk)
  {
    name: 'native',
    b: native,
    skip: nativeSkip,
    modes: [nativeChunk(undefined), nativeChunk(4096)],
    filterTol: tol,
    networkBatch: 64,
  },
  // batch 16 keeps the float64 reference quick; batch 64's plans are checked below
  {
    name: 'onednn',
    b: onednn,
    skip: onednnSkip,
    modes: [onednnDirect(true), onednnDirect(false)],
    filterTol: sumTol,
    networkBatch: 16,
  },
];

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

/** Places copies of arrays: in the backend's wasm memory, at float offset 3 of a SharedArrayBuffer, plain, or alternating. */
class Placer {
  private n = 0;
  constructor(
    private readonly b: Backend,
    private readonly where: Placement,
  ) {}
  f32(a: ArrayLike<number>): Float32Array {
    const kinds: Placement[] = ['wasm', 'sab+3', 'js'];
    const w = this.where === 'mixed' ? kinds[this.n++ % 3]! : this.where;
    const out =
      w === 'wasm'
        ? this.b.alloc(a.length)
        : w === 'sab+3'
          ? new Float32Array(new SharedArrayBuffer((a.length + 4) * 4), 12, a.length)
          : new Float32Array(a.length);
    out.set(a);
    return out;
  }
}

/** conv(32, 3×3) on 28×28×1 and conv(64, 3×3) on 13×13×32, as in examples/mnist-small.yaml. */
const network = (N: number) => [
  convGeometry(N, 28, 28, 1, 3, 3, 32, 1, 1, 'valid'),
  convGeometry(N, 13, 13, 32, 3, 3, 64, 1, 1, 'valid'),
];

for (const v of VARIANTS) {
  const { skip } = v;

  test(`${v.name} conv2d forward matches the reference (bias or not, every placement)`, { skip }, () => {
    const b = v.b!;
    CASES.forEach((g, i) => {
      const s = convSizes(g);
      const x = randomArray(s.x, 10 + i),
        w = randomArray(s.w, 20 + i),
        bias = randomArray(g.F, 30 + i);
      for (const withBias of [false, true]) {
        const want = new Float32Array(s.y);
        ref.conv2dForward(x, w, withBias ? bias : null, want, g);
        for (const where of PLACEMENTS)
          for (const mode of v.modes) {
            const p = new Placer(b, where);
            const y = p.f32(new Float32Array(s.y).fill(NaN));
            mode.run(() => b.conv2dForward(p.f32(x), p.f32(w), withBias ? p.f32(bias) : null, y, g));
            assertClose(y, want, {
              ...tol(g.KH * g.KW * g.C),
              what: `${v.name} ${describeConv(g)} bias=${withBias} ${where} ${mode.name} y`,
            });
          }
      }
    });
  });

  test(`${v.name} conv2d backward data matches the reference and overwrites dx`, { skip }, () => {
    const b = v.b!;
    CASES.forEach((g, i) => {
      const s = convSizes(g);
      const w = randomArray(s.w, 40 + i),
        dy = randomArray(s.y, 50 + i);
      const want = new Float32Array(s.x);
      ref.conv2dBackwardData(dy, w, want, g);
      for (const where of PLACEMENTS)
        for (const mode of v.modes) {
          const p = new Placer(b, where);
          const dx = p.f32(new Float32Array(s.x).fill(NaN));
          mode.run(() => b.conv2dBackwardData(p.f32(dy), p.f32(w), dx, g));
          assertClose(dx, want, {
            ...tol(g.KH * g.KW * g.F),
            what: `${v.name} ${describeConv(g)} ${where} ${mode.name} dx`,
          });
        }
    });
  });

  test(`${v.name} conv2d backward filter matches the reference and accumulates dw, db`, { skip }, () => {
    const b = v.b!;
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
        for (const mode of v.modes) {
          const p = new Placer(b, where);
          const dw = p.f32(dw0),
            db = p.f32(db0);
          mode.run(() => b.conv2dBackwardFilter(p.f32(x), p.f32(dy), dw, db, g));
          const what = `${v.name} ${describeConv(g)} ${where} ${mode.name}`;
          assertClose(dw, wantW, { ...v.filterTol(terms), what: `${what} dw` });
          assertClose(db, wantB, { ...v.filterTol(terms), what: `${what} db` });
          const dwOnly = p.f32(dw0);
          mode.run(() => b.conv2dBackwardFilter(p.f32(x), p.f32(dy), dwOnly, null, g));
          assertClose(dwOnly, wantW, { ...v.filterTol(terms), what: `${what} dw without db` });
        }
    });
    if (b === onednn) {
      const stats = onednn.stats();
      for (const kind of ['convForward', 'convBackwardData', 'convBackwardWeights'] as const) {
        assert.equal(
          stats[kind].unsupported,
          0,
          `${kind}: every case ran as a oneDNN primitive or the addon's own kernel`,
        );
      }
    }
  });

  test(`${v.name} conv2d at the network shapes (batch ${v.networkBatch}) matches the reference`, { skip }, () => {
    const b = v.b!;
    for (const [i, g] of network(v.networkBatch).entries()) {
      const s = convSizes(g);
      const x = b.alloc(s.x),
        w = b.alloc(s.w),
        dy = b.alloc(s.y),
        bias = b.alloc(g.F);
      x.set(randomArray(s.x, 200 + i));
      w.set(randomArray(s.w, 210 + i));
      dy.set(randomArray(s.y, 220 + i));
      bias.set(randomArray(g.F, 230 + i));
      const want = new Float32Array(s.y),
        wantW = new Float32Array(s.w),
        wantB = new Float32Array(g.F),
        wantX = new Float32Array(s.x);
      ref.conv2dForward(x, w, bias, want, g);
      ref.conv2dBackwardFilter(x, dy, wantW, wantB, g);
      ref.conv2dBackwardData(dy, w, wantX, g);
      for (const mode of v.modes) {
        const y = b.alloc(s.y),
          dw = b.alloc(s.w),
          db = b.alloc(g.F),
          dx = b.alloc(s.x);
        mode.run(() => {
          b.conv2dForward(x, w, bias, y, g);
          b.conv2dBackwardFilter(x, dy, dw, db, g);
          b.conv2dBackwardData(dy, w, dx, g);
        });
        const what = `${v.name} ${describeConv(g)} ${mode.name}`;
        assertClose(y, want, { ...tol(g.KH * g.KW * g.C), what: `${what} y` });
        assertClose(dw, wantW, { ...v.filterTol(g.N * g.OH * g.OW), what: `${what} dw` });
        assertClose(db, wantB, { ...v.filterTol(g.N * g.OH * g.OW), what: `${what} db` });
        assertClose(dx, wantX, { ...tol(g.KH * g.KW * g.F), what: `${what} dx` });
      }
    }
  });

  test(`${v.name} conv2d backward passes satisfy the adjoint identity of the forward`, { skip }, () => {
    for (const mode of v.modes) mode.run(() => assertConvAdjoint(v.b!, CASES, randomArray));
  });

  test(`${v.name} conv2d rejects short operands and bad geometry before touching memory`, { skip }, () => {
    const b = v.b!;
    const g = convGeometry(2, 7, 7, 3, 3, 3, 5, 1, 1, 'valid');
    const s = convSizes(g);
    const f = (n: number) => new Float32Array(n);
    assert.throws(
      () => b.conv2dForward(f(s.x - 1), f(s.w), null, f(s.y), g),
      /conv2dForward: x has \d+ values, needs \d+/,
    );
    assert.throws(() => b.conv2dForward(f(s.x), f(s.w), f(g.F - 1), f(s.y), g), /bias has 4 values, needs 5/);
    assert.throws(() => b.conv2dBackwardData(f(s.y), f(s.w), f(s.x - 1), g), /conv2dBackwardData: dx has/);
    assert.throws(
      () => b.conv2dBackwardFilter(f(s.x), f(s.y), f(s.w), f(1), g),
      /conv2dBackwardFilter: db has 1 values, needs 5/,
    );
    assert.throws(() => b.conv2dForward(f(s.x), f(s.w), null, f(s.y), { ...g, strideH: 0 }), /strides must be >= 1/);
    assert.throws(
      () => b.conv2dForward(f(s.x), f(s.w), null, f(s.y), { ...g, padTop: -1 }),
      /geometry field padTop must be a non-negative integer/,
    );
    assert.throws(() => b.conv2dForward(f(s.x), f(s.w), null, f(s.y), { ...g, OH: 1e10 }), /geometry field OH/);
  });

  test(`${v.name} conv2d with an empty window (C = 0) gives the bias, and its backward passes leave dw empty`, {
    skip,
  }, () => {
    const b = v.b!;
    const g: Conv2DGeometry = {
      N: 2,
      H: 3,
      W: 3,
      C: 0,
      KH: 3,
      KW: 3,
      F: 4,
      strideH: 1,
      strideW: 1,
      padTop: 1,
      padLeft: 1,
      OH: 3,
      OW: 3,
    };
    const none = new Float32Array(0),
      bias = Float32Array.of(1, 2, 3, 4);
    for (const withBias of [true, false]) {
      const y = new Float32Array(2 * 9 * 4).fill(NaN),
        want = new Float32Array(2 * 9 * 4);
      b.conv2dForward(none, none, withBias ? bias : null, y, g);
      ref.conv2dForward(none, none, withBias ? bias : null, want, g);
      assert.deepEqual([...y], [...want]);
    }
    const dy = randomArray(2 * 9 * 4, 5),
      db = Float32Array.of(1, 1, 1, 1),
      wantB = db.slice();
    b.conv2dBackwardFilter(none, dy, none, db, g);
    ref.conv2dBackwardFilter(none, dy, none, wantB, g);
    assertClose(db, wantB, { what: 'db' });
    b.conv2dBackwardData(dy, none, none, g);
  });
}

// oneDNN 2.6 has direct NHWC kernels for all three passes with AVX-512; elsewhere it may rightly choose others.
const avx512 = onednn?.onednn.isa.startsWith('avx512')
  ? false
  : `oneDNN dispatches ${onednn?.onednn.isa} here; the kernel choice is checked on AVX-512 machines`;

test("onednn conv2d at the network shapes (batch 64): oneDNN's direct kernels, not its im2col + gemm one; one input channel on the addon's own", {
  skip: onednnSkip || avx512,
}, () => {
  const b = onednn!;
  for (const g of network(64)) {
    const s = convSizes(g);
    const x = b.alloc(s.x),
      w = b.alloc(s.w),
      dy = b.alloc(s.y),
      y = b.alloc(s.y),
      dx = b.alloc(s.x),
      dw = b.alloc(s.w),
      db = b.alloc(g.F);
    const passes = () => {
      b.conv2dForward(x, w, db, y, g);
      b.conv2dBackwardData(dy, w, dx, g);
      b.conv2dBackwardFilter(x, dy, dw, db, g);
    };
    onednnDirect(false).run(passes);
    const stats = b.stats();
    for (const kind of ['convForward', 'convBackwardData', 'convBackwardWeights'] as const) {
      assert.doesNotMatch(stats[kind].impl, /gemm|ref/, `${describeConv(g)} ${kind} ran ${stats[kind].impl}`);
    }
    passes();
    const after = b.stats();
    for (const kind of ['convForward', 'convBackwardData', 'convBackwardWeights'] as const) {
      assert.equal(
        after[kind].direct - stats[kind].direct,
        g.C === 1 ? 1 : 0,
        `${describeConv(g)} ${kind}: the addon's own kernel ran ${g.C === 1 ? 'once' : 'never'}`,
      );
    }
  }
});

// Without AVX-512, filter gradients run as im2col + dnnl_sgemm (native/onednn/gemmconv.c): twice oneDNN 2.6's jit:avx2 kernel.
const noAvx512 = !onednn
  ? onednnSkip
  : onednn.onednn.isa.startsWith('avx512')
    ? 'this CPU has AVX-512: the primitive computes filter gradients'
    : false;

test('onednn without AVX-512: filter gradients of windows of 64 values or more at the network shapes (batch 64) are im2col + sgemm, the rest primitives', {
  skip: noAvx512,
}, () => {
  const b = onednn!;
  for (const g of network(64)) {
    const s = convSizes(g);
    const x = b.alloc(s.x),
      w = b.alloc(s.w),
      dy = b.alloc(s.y),
      y = b.alloc(s.y),
      dx = b.alloc(s.x),
      dw = b.alloc(s.w),
      db = b.alloc(g.F);
    const before = b.stats();
    b.conv2dForward(x, w, db, y, g);
    b.conv2dBackwardData(dy, w, dx, g);
    b.conv2dBackwardFilter(x, dy, dw, db, g);
    const after = b.stats();
    const gemm = g.KH * g.KW * g.C >= 64 ? 1 : 0;
    assert.equal(
      after.convBackwardWeights.direct - before.convBackwardWeights.direct,
      gemm,
      `${describeConv(g)}: the filter gradient in the addon ${gemm} times`,
    );
    for (const kind of ['convForward', 'convBackwardData'] as const)
      assert.equal(after[kind].direct, before[kind].direct, `${describeConv(g)} ${kind}: a primitive`);
  }
});
