// gemm of the backends with an addon, one test per check run on each of them: native (OpenBLAS
// cblas_sgemm) and onednn (oneDNN's matmul primitive, and its dnnl_sgemm entry point, setGemm),
// against the reference: every transpose, alpha/beta, odd sizes, and operands that are views at
// non-zero offsets into a SharedArrayBuffer, into the wasm backend's shared memory, or plain arrays;
// beta = 0 over NaN, K = 0, C views inside longer arrays, memory growth, bad input. A backend whose
// addon is not built skips its runs (both are optional: `apt-get install libopenblas-dev libdnnl-dev`,
// then `npm run build:native`, `npm run build:onednn`).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { assertClose, randomArray } from '../util/close.ts';
import { referenceBackend as ref } from './reference.ts';
import { createNativeBackend, nativeUnavailableReason, type NativeBackend } from '../../src/kernels/native/index.ts';
import { createOneDnnBackend, onednnUnavailableReason, type OneDnnBackend } from '../../src/kernels/onednn/index.ts';
import type { WasmBackend } from '../../src/kernels/wasm/index.ts';

type AddonBackend = (NativeBackend | OneDnnBackend) & WasmBackend;

/** One way a backend computes gemm: `run` wraps a check in its mode (onednn's entry point). */
interface Variant {
  name: string;
  b: AddonBackend | null;
  skip: string | false;
  run(fn: () => void): void;
  sizes: number[];
}

const native = (await createNativeBackend()) as AddonBackend | null;
const onednn = (await createOneDnnBackend()) as (OneDnnBackend & WasmBackend) | null;
const nativeSkip = native ? false : `native backend unavailable: ${nativeUnavailableReason()}`;
const onednnSkip = onednn ? false : `onednn backend unavailable: ${onednnUnavailableReason()}`;

/** gemm through onednn's `mode`, then back to the default. */
const onednnMode =
  (mode: 'matmul' | 'sgemm') =>
  (fn: () => void): void => {
    onednn!.setGemm(mode);
    try {
      fn();
    } finally {
      onednn!.setGemm('matmul');
    }
  };

// onednn makes a oneDNN plan per shape (a few ms each): it checks one size fewer
const VARIANTS: Variant[] = [
  { name: 'native', b: native, skip: nativeSkip, run: (fn) => fn(), sizes: [1, 7, 33, 65, 129] },
  { name: 'onednn matmul', b: onednn, skip: onednnSkip, run: onednnMode('matmul'), sizes: [1, 7, 33, 129] },
  { name: 'onednn sgemm', b: onednn, skip: onednnSkip, run: onednnMode('sgemm'), sizes: [7, 33, 65] },
];
const LAYOUTS = [
  [false, false],
  [true, false],
  [false, true],
  [true, true],
] as const;

/**
 * Where an operand lives: the backend's wasm memory (from alloc), a view at an odd float offset
 * into that memory, a view at an odd offset into a plain SharedArrayBuffer, or a plain array.
 */
type Placement = 'wasm' | 'wasm+3' | 'sab+5' | 'js';
const PLACEMENTS: readonly Placement[] = ['wasm', 'wasm+3', 'sab+5', 'js'];

function place(b: AddonBackend, where: Placement, a: ArrayLike<number>): Float32Array {
  let out: Float32Array;
  if (where === 'wasm') out = b.alloc(a.length);
  else if (where === 'wasm+3') out = b.alloc(a.length + 7).subarray(3, 3 + a.length);
  else if (where === 'sab+5') out = new Float32Array(new SharedArrayBuffer((a.length + 9) * 4), 5 * 4, a.length);
  else out = new Float32Array(a.length);
  out.set(a);
  return out;
}

// Sums of K products of values in [-1, 1): absolute error grows like sqrt(K)·eps.
const tol = (K: number, alpha: number) => ({
  rtol: 1e-5,
  atol: 2e-6 * (1 + Math.sqrt(K)) * Math.max(1, Math.abs(alpha)),
});

function check(
  v: Variant,
  where: Placement,
  transA: boolean,
  transB: boolean,
  M: number,
  N: number,
  K: number,
  alpha: number,
  beta: number,
  seed: number,
): void {
  const b = v.b!;
  const A = randomArray(M * K, seed),
    B = randomArray(K * N, seed + 1),
    C0 = randomArray(M * N, seed + 2);
  const want = C0.slice();
  ref.gemm(transA, transB, M, N, K, alpha, A, B, beta, want);
  const got = place(b, where, C0);
  b.gemm(transA, transB, M, N, K, alpha, place(b, where, A), place(b, where, B), beta, got);
  assertClose(got, want, {
    ...tol(K, alpha),
    what: `${v.name} gemm[${where}](${transA}, ${transB}, M=${M}, N=${N}, K=${K}, alpha=${alpha}, beta=${beta})`,
  });
}

test('native backend: OpenBLAS runs on one thread', { skip: nativeSkip }, () => {
  const b = native as NativeBackend;
  assert.equal(b.name, 'native');
  assert.equal(b.blas.threads, 1, `OpenBLAS uses ${b.blas.threads} threads (${b.blas.config})`);
  assert.match(b.blas.config, /OpenBLAS/);
});

for (const v of VARIANTS) {
  const { skip } = v;

  test(`${v.name} gemm matches the reference on odd sizes (${v.sizes.join(', ')}) for every transpose`, { skip }, () =>
    v.run(() => {
      let seed = 1;
      for (const [ta, tb] of LAYOUTS) {
        for (const M of v.sizes)
          for (const N of v.sizes) for (const K of v.sizes) check(v, 'wasm', ta, tb, M, N, K, 1, 0, seed++);
      }
      for (const [ta, tb] of LAYOUTS) check(v, 'wasm', ta, tb, 65, 33, 7, 1, 0, seed++);
      if (v.b === onednn) assert.equal(onednn!.stats().matmul.unsupported, 0, 'every shape ran as a oneDNN matmul');
    }),
  );

  test(
    `${v.name} gemm: alpha and beta, with operands in wasm memory, SharedArrayBuffer views at offsets and plain arrays`,
    { skip },
    () =>
      v.run(() => {
        let seed = 5000;
        for (const [ta, tb] of LAYOUTS)
          for (const where of PLACEMENTS) {
            for (const [alpha, beta] of [
              [-1.5, 0.75],
              [0.5, 1],
              [2, -2],
              [1, 0],
            ] as const) {
              check(v, where, ta, tb, 7, 33, 65, alpha, beta, seed++);
              check(v, where, ta, tb, 129, 1, 7, alpha, beta, seed++);
              check(v, where, ta, tb, 33, 65, 1, alpha, beta, seed++);
            }
          }
      }),
  );

  test(`${v.name} gemm at the training shapes (dense layer of mnist-small, batch 64)`, { skip }, () =>
    v.run(() => {
      let seed = 9000;
      check(v, 'wasm', false, false, 64, 128, 1600, 1, 0, seed++);
      check(v, 'sab+5', false, true, 64, 1600, 128, 1, 0, seed++);
      check(v, 'wasm+3', true, false, 1600, 128, 64, 1, 1, seed++);
      check(v, 'js', false, false, 257, 129, 769, 1, 0, seed++);
    }),
  );

  test(`${v.name} gemm: beta = 0 overwrites NaN; K = 0 and alpha = 0 only scale C`, { skip }, () =>
    v.run(() => {
      const b = v.b!;
      for (const where of PLACEMENTS) {
        const A = randomArray(6 * 5, 7),
          B = randomArray(5 * 9, 8);
        const C = place(b, where, new Float32Array(6 * 9).fill(NaN));
        b.gemm(false, false, 6, 9, 5, 1, place(b, where, A), place(b, where, B), 0, C);
        const want = new Float32Array(6 * 9);
        ref.gemm(false, false, 6, 9, 5, 1, A, B, 0, want);
        assertClose(C, want, { rtol: 1e-5, atol: 1e-5, what: `${v.name} ${where} beta=0 over NaN` });

        const C2 = place(b, where, [1, 2, 3, 4]);
        b.gemm(false, false, 2, 2, 0, 1, new Float32Array(0), new Float32Array(0), 3, C2);
        assert.deepEqual([...C2], [3, 6, 9, 12]);
        b.gemm(false, false, 2, 2, 1, 0, place(b, where, [NaN, NaN]), place(b, where, [1, 1]), 1, C2);
        assert.deepEqual([...C2], [3, 6, 9, 12]);
        b.gemm(true, true, 2, 2, 0, 1, new Float32Array(0), new Float32Array(0), 0, C2);
        assert.deepEqual([...C2], [0, 0, 0, 0]);
        b.gemm(
          false,
          false,
          0,
          3,
          4,
          1,
          new Float32Array(0),
          place(b, where, new Float32Array(12)),
          0,
          new Float32Array(0),
        );
      }
    }),
  );

  test(`${v.name} gemm writes only the first M·N values of a longer C view, in every placement`, { skip }, () =>
    v.run(() => {
      const b = v.b!;
      const A = randomArray(3 * 4, 3),
        B = randomArray(4 * 5, 4);
      const want = new Float32Array(15);
      ref.gemm(false, false, 3, 5, 4, 1, A, B, 0, want);
      for (const where of PLACEMENTS) {
        const buf = place(b, where, new Float32Array(40).fill(7));
        const C = buf.subarray(5, 5 + 15);
        b.gemm(false, false, 3, 5, 4, 1, A, B, 0, C);
        assertClose(C, want, { rtol: 1e-5, atol: 1e-5, what: where });
        assert.ok(
          buf.subarray(0, 5).every((x) => x === 7) && buf.subarray(20).every((x) => x === 7),
          `${where}: wrote outside C`,
        );
      }
    }),
  );

  test(
    `${v.name} gemm keeps working on views made before the wasm memory grew (a cached plan takes the new pointers)`,
    { skip },
    () =>
      v.run(() => {
        const b = v.b!;
        const A = place(b, 'wasm+3', randomArray(9 * 11, 11)),
          B = place(b, 'wasm', randomArray(11 * 13, 12)),
          C = place(b, 'wasm', new Float32Array(9 * 13));
        b.gemm(false, false, 9, 13, 11, 1, A, B, 0, C);
        const before = b.memory.buffer.byteLength;
        b.alloc(before / 4 + 1); // forces memory.grow
        assert.ok(b.memory.buffer.byteLength > before);
        C.fill(NaN);
        b.gemm(false, false, 9, 13, 11, 1, A, B, 0, C);
        const want = new Float32Array(9 * 13);
        ref.gemm(false, false, 9, 13, 11, 1, A, B, 0, want);
        assertClose(C, want, { ...tol(11, 1), what: 'after grow' });
      }),
  );

  test(
    `${v.name} gemm rejects short operands, wrong types and bad sizes with clear errors (never touches memory)`,
    { skip },
    () =>
      v.run(() => {
        const b = v.b!;
        const f16 = () => new Float32Array(16);
        assert.throws(
          () => b.gemm(false, false, 4, 4, 4, 1, new Float32Array(15), f16(), 0, f16()),
          /gemm: A has 15 values, needs 16/,
        );
        assert.throws(
          () => b.gemm(true, true, 4, 4, 4, 1, f16(), new Float32Array(3), 0, f16()),
          /B has 3 values, needs 16/,
        );
        assert.throws(
          () => b.gemm(false, false, 4, 4, 4, 1, f16(), f16(), 0, f16().subarray(1)),
          /C has 15 values, needs 16/,
        );
        assert.throws(
          () => b.gemm(false, false, 4, 4, 4, 1, new Float64Array(16) as never, f16(), 0, f16()),
          TypeError,
        );
        assert.throws(
          () => b.gemm(false, false, -1, 4, 4, 1, f16(), f16(), 0, f16()),
          /size M must be a non-negative integer/,
        );
        assert.throws(
          () => b.gemm(false, false, 4, 2.5, 4, 1, f16(), f16(), 0, f16()),
          /size N must be a non-negative integer/,
        );
      }),
  );
}

test('onednn setGemm refuses an unknown entry point', { skip: onednnSkip }, () => {
  assert.throws(() => onednn!.setGemm('blas' as never), /mode must be 'matmul' or 'sgemm'/);
});

// Without AVX-512, operands whose rows are a multiple of 512 floats apart (B untransposed: N; A transposed: M) are
// copied into longer rows before oneDNN's sgemm (native/onednn/gemm.c); with its own kernels off, the matmul primitive.
const padded = !onednn
  ? onednnSkip
  : onednn.onednn.isa.startsWith('avx512')
    ? 'this CPU has AVX-512: no operand is padded'
    : false;

test("onednn without AVX-512: rows 512 floats apart are padded for sgemm, and the product equals the reference and the primitive's", {
  skip: padded,
}, () => {
  const b = onednn!;
  const v = VARIANTS.find((x) => x.b === onednn)!;
  let seed = 9000;
  // [transA, transB, M, N, K, padded?]: B's rows N = 512 or 1024 apart, A's (transposed) M = 512 apart, both, neither
  const shapes = [
    [false, false, 3, 512, 5, true],
    [false, false, 2, 1024, 3, true],
    [true, false, 512, 7, 3, true],
    [true, false, 512, 512, 2, true],
    [false, true, 3, 512, 5, false],
    [true, true, 512, 3, 4, true],
    [false, false, 3, 511, 5, false],
  ] as const;
  for (const [ta, tb, M, N, K, pads] of shapes) {
    for (const direct of [true, false]) {
      const before = b.setDirect(direct);
      const was = b.stats().matmul.direct;
      try {
        for (const [alpha, beta] of [
          [1, 0],
          [-0.5, 1],
        ] as const)
          check(v, 'wasm+3', ta, tb, M, N, K, alpha, beta, seed++);
      } finally {
        b.setDirect(before);
      }
      assert.equal(
        b.stats().matmul.direct - was,
        direct && pads ? 2 : 0,
        `${ta},${tb} ${M}×${N}×${K} padded: ${direct && pads}`,
      );
    }
  }
});
