/**
 * The webgpu recurrent kernels against the js backend:
 * - the LSTM and GRU cell steps, forward and backward, over every step of a time-major run with
 *   padded samples (lengths 0 … T) and a non-zero initial state: every output buffer equals js's
 *   WHOLE (blocks not yet stepped hold sentinels and must keep them); H = 3, 9 and 70 (N·H across
 *   the 64-thread workgroups); pre-activations up to ±40 (σ and tanh saturated);
 * - the same steps with every array, lengths (i32) included, a view of one buffer;
 * - packB + gemmPacked equal js's for both layouts of B, alpha/beta and offsets; a pack is refilled in
 *   place and another backend's refused;
 * - whole LSTM and GRU sequences, forward and backward, whose recurrent products are gemmPacked on
 *   slices of the time-major buffers, as src/nn/lstmCell.ts and gruCell.ts run them.
 * Tolerances: cells rtol 1e-5, atol 1e-6 (float32 exp and tanh against float64 Math); products
 * and sequences rtol 1e-5, atol 2e-6·(1 + √K) per product deep.
 */
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { jsBackend } from '../../src/kernels/js/index.ts';
import type { GpuArray } from '../../src/kernels/webgpu/gpuArray.ts';
import { gpuView } from '../../src/kernels/webgpu/gpuArray.ts';
import type { GpuContext } from '../../src/kernels/webgpu/gpuContext.ts';
import { gemmPacked, packB } from '../../src/kernels/webgpu/packedGemm.ts';
import {
  gruCellBackward,
  gruCellForward,
  lstmCellBackward,
  lstmCellForward,
} from '../../src/kernels/webgpu/recurrent.ts';
import { assertClose, randomArray } from '../util/close.ts';
import { gpuOrSkip, releaseGpu } from './gpuTest.ts';

after(releaseGpu);

const cellTol = { rtol: 1e-5, atol: 1e-6 };
const gemmTol = (K: number) => ({ rtol: 1e-5, atol: 2e-6 * (1 + Math.sqrt(K)) });
const SENTINEL = 7.25;

/** lengths as i32 bits in a float array, for upload. */
const lengthBits = (lengths: Int32Array) => new Float32Array(lengths.buffer.slice(0));

/** A state buffer [(T+1)·N·H]: block 0 the initial state, the rest sentinels. */
function states(T: number, NH: number, seed: number): Float32Array {
  const a = new Float32Array((T + 1) * NH).fill(SENTINEL);
  a.set(randomArray(NH, seed));
  return a;
}

/** Pre-activations in [−3, 3), a few at ±40. */
function preActivations(n: number, seed: number): Float32Array {
  return randomArray(n, seed).map((v, i) => (i % 37 === 5 ? Math.sign(v) * 40 : 3 * v));
}

const T = 4;
const lengths = new Int32Array([0, 1, 4, 2, 4]);
const N = lengths.length;

test('LSTM cell steps, forward and backward, equal js over a padded run', async (t) => {
  const gpu = await gpuOrSkip(t);
  if (!gpu) return;
  for (const H of [3, 9, 70]) {
    const NH = N * H,
      G = T * N * 4 * H;
    const gates = preActivations(G, H),
      c = states(T, NH, H + 1),
      h = states(T, NH, H + 2);
    const gGates = gpu.upload(gates),
      gc = gpu.upload(c),
      gh = gpu.upload(h),
      gLengths = gpu.upload(lengthBits(lengths));
    for (let s = 0; s < T; s++) {
      lstmCellForward(gpu, s, N, H, gGates, gc, gh, gLengths);
      jsBackend.lstmCellForward(s, N, H, gates, c, h, lengths);
    }
    const [g1, c1, h1] = await gpu.read(gGates, gc, gh);
    assertClose(g1!, gates, { ...cellTol, what: `H=${H} forward gates` });
    assertClose(c1!, c, { ...cellTol, what: `H=${H} forward c` });
    assertClose(h1!, h, { ...cellTol, what: `H=${H} forward h` });
    // backward from js's forward, so that it is judged alone
    const dh = randomArray((T + 1) * NH, H + 3),
      dc = randomArray(NH, H + 4),
      dz = new Float32Array(G).fill(SENTINEL);
    const gdh = gpu.upload(dh),
      gdc = gpu.upload(dc),
      gdz = gpu.upload(dz);
    gpu.upload(gates, gGates);
    gpu.upload(c, gc);
    for (let s = T - 1; s >= 0; s--) {
      lstmCellBackward(gpu, s, N, H, gGates, gc, gdh, gdc, gdz, gLengths);
      jsBackend.lstmCellBackward(s, N, H, gates, c, dh, dc, dz, lengths);
    }
    const [dz1, dc1, dh1] = await gpu.read(gdz, gdc, gdh);
    assertClose(dz1!, dz, { ...cellTol, what: `H=${H} backward dz` });
    assertClose(dc1!, dc, { ...cellTol, what: `H=${H} backward dc` });
    assertClose(dh1!, dh, { rtol: 0, atol: 0, what: `H=${H} dh unchanged` });
  }
});

test('GRU cell steps, forward and backward, equal js over a padded run', async (t) => {
  const gpu = await gpuOrSkip(t);
  if (!gpu) return;
  for (const H of [3, 9, 70]) {
    const NH = N * H,
      G = T * N * 3 * H;
    const gates = preActivations(G, H),
      rec = preActivations(N * 3 * H, H + 1),
      bhh = randomArray(3 * H, H + 2),
      hn = new Float32Array(T * NH).fill(SENTINEL),
      h = states(T, NH, H + 3);
    const gGates = gpu.upload(gates),
      gRec = gpu.upload(rec),
      gBhh = gpu.upload(bhh),
      ghn = gpu.upload(hn),
      gh = gpu.upload(h),
      gLengths = gpu.upload(lengthBits(lengths));
    for (let s = 0; s < T; s++) {
      gruCellForward(gpu, s, N, H, gGates, gRec, gBhh, ghn, gh, gLengths);
      jsBackend.gruCellForward(s, N, H, gates, rec, bhh, hn, h, lengths);
    }
    const [g1, hn1, h1] = await gpu.read(gGates, ghn, gh);
    assertClose(g1!, gates, { ...cellTol, what: `H=${H} forward gates` });
    assertClose(hn1!, hn, { ...cellTol, what: `H=${H} forward hn` });
    assertClose(h1!, h, { ...cellTol, what: `H=${H} forward h` });
    const dh = randomArray((T + 1) * NH, H + 4),
      dzx = new Float32Array(G).fill(SENTINEL),
      dzh = new Float32Array(G).fill(-SENTINEL);
    const gdh = gpu.upload(dh),
      gdzx = gpu.upload(dzx),
      gdzh = gpu.upload(dzh);
    gpu.upload(gates, gGates);
    gpu.upload(hn, ghn);
    gpu.upload(h, gh);
    for (let s = T - 1; s >= 0; s--) {
      gruCellBackward(gpu, s, N, H, gGates, ghn, gh, gdh, gdzx, gdzh, gLengths);
      jsBackend.gruCellBackward(s, N, H, gates, hn, h, dh, dzx, dzh, lengths);
    }
    const [dzx1, dzh1, dh1] = await gpu.read(gdzx, gdzh, gdh);
    assertClose(dzx1!, dzx, { ...cellTol, what: `H=${H} backward dzx` });
    assertClose(dzh1!, dzh, { ...cellTol, what: `H=${H} backward dzh` });
    assertClose(dh1!, dh, { ...cellTol, what: `H=${H} backward dh` });
  }
});

test('cell steps on views of one buffer: gates, states and lengths (i32) together', async (t) => {
  const gpu = await gpuOrSkip(t);
  if (!gpu) return;
  const H = 5,
    NH = N * H,
    G = T * N * 4 * H,
    S = (T + 1) * NH;
  const gates = preActivations(G, 1),
    c = states(T, NH, 2),
    h = states(T, NH, 3);
  // [1 spare, lengths, gates, c, h]
  const flat = new Float32Array(1 + N + G + 2 * S);
  flat.set(lengthBits(lengths), 1);
  flat.set(gates, 1 + N);
  flat.set(c, 1 + N + G);
  flat.set(h, 1 + N + G + S);
  const g = gpu.upload(flat);
  const view = (at: number, n: number) => gpuView(g, at, n);
  for (let s = 0; s < T; s++) {
    lstmCellForward(gpu, s, N, H, view(1 + N, G), view(1 + N + G, S), view(1 + N + G + S, S), view(1, N));
    jsBackend.lstmCellForward(s, N, H, gates, c, h, lengths);
  }
  const [out] = await gpu.read(g);
  assertClose(out!.subarray(1 + N, 1 + N + G), gates, { ...cellTol, what: 'gates' });
  assertClose(out!.subarray(1 + N + G, 1 + N + G + S), c, { ...cellTol, what: 'c' });
  assertClose(out!.subarray(1 + N + G + S), h, { ...cellTol, what: 'h' });
  assert.deepEqual(new Int32Array(out!.buffer, out!.byteOffset + 4, N), lengths, 'lengths unchanged');
});

test('packB + gemmPacked equal js: both layouts of B, alpha/beta, offsets; a pack refilled, a foreign one refused', async (t) => {
  const gpu = await gpuOrSkip(t);
  if (!gpu) return;
  // transA passes through to gemm.ts (tested on its own): the pack's layout and the offsets are what is new here
  const results: [GpuArray, Float32Array, string, number][] = [];
  let seed = 1;
  for (const [M, Nn, K] of [
    [1, 1, 1],
    [5, 13, 7],
    [70, 65, 33],
  ] as const)
    for (const transB of [false, true])
      for (const [alpha, beta] of [
        [1, 1],
        [-0.5, 0],
      ] as const) {
        const aOffset = 3,
          cOffset = 5;
        const A = randomArray(aOffset + M * K + 2, seed++),
          B = randomArray(K * Nn, seed++),
          C = randomArray(cOffset + M * Nn + 4, seed++);
        const want = C.slice();
        jsBackend.gemmPacked(
          false,
          M,
          Nn,
          K,
          alpha,
          A,
          jsBackend.packB(transB, K, Nn, B),
          beta,
          want,
          aOffset,
          cOffset,
        );
        const gC = gpu.upload(C);
        gemmPacked(
          gpu,
          false,
          M,
          Nn,
          K,
          alpha,
          gpu.upload(A),
          packB(gpu, transB, K, Nn, gpu.upload(B)),
          beta,
          gC,
          aOffset,
          cOffset,
        );
        results.push([gC, want, `M=${M} N=${Nn} K=${K} transB=${transB} α=${alpha} β=${beta}`, K]);
      }
  const got = await gpu.read(...results.map((r) => r[0]));
  for (const [i, [, want, what, K]] of results.entries()) assertClose(got[i]!, want, { ...gemmTol(K), what });
  const first = packB(gpu, false, 4, 6, gpu.array(24));
  const B2 = gpu.array(24);
  assert.equal(packB(gpu, true, 4, 6, B2, first), first, 'a pack of the same shape is refilled');
  assert.notEqual(packB(gpu, false, 6, 4, B2, first), first, 'another shape makes a new pack');
  assert.throws(
    () =>
      gemmPacked(
        gpu,
        false,
        2,
        6,
        4,
        1,
        gpu.array(8),
        jsBackend.packB(false, 4, 6, new Float32Array(24)),
        0,
        gpu.array(12),
      ),
    /made by the js backend/,
  );
  assert.throws(() => gemmPacked(gpu, false, 2, 5, 4, 1, gpu.array(8), first, 0, gpu.array(10)), /the pack is 4×6/);
});

/** Units of the sequences' cells. */
const H_SEQ = 6;

/** One run's buffers on either backend, and the operations a sequence needs. */
interface SequenceOps<A> {
  put(a: Float32Array): A;
  packB(transB: boolean, K: number, N: number, B: A): unknown;
  gemmPacked(
    M: number,
    N: number,
    K: number,
    A: A,
    P: unknown,
    beta: number,
    C: A,
    aOffset: number,
    cOffset: number,
  ): void;
  lstmForward(t: number, g: A, c: A, h: A): void;
  lstmBackward(t: number, g: A, c: A, dh: A, dc: A, dz: A): void;
  gruForward(t: number, g: A, rec: A, bhh: A, hn: A, h: A): void;
  gruBackward(t: number, g: A, hn: A, h: A, dh: A, dzx: A, dzh: A): void;
}

function gpuOps(gpu: GpuContext, gLengths: GpuArray): SequenceOps<GpuArray> {
  return {
    put: (a) => gpu.upload(a),
    packB: (transB, K, n, B) => packB(gpu, transB, K, n, B),
    gemmPacked: (M, n, K, A, P, beta, C, ao, co) =>
      gemmPacked(gpu, false, M, n, K, 1, A, P as ReturnType<typeof packB>, beta, C, ao, co),
    lstmForward: (t, g, c, h) => lstmCellForward(gpu, t, N, H_SEQ, g, c, h, gLengths),
    lstmBackward: (t, g, c, dh, dc, dz) => lstmCellBackward(gpu, t, N, H_SEQ, g, c, dh, dc, dz, gLengths),
    gruForward: (t, g, rec, bhh, hn, h) => gruCellForward(gpu, t, N, H_SEQ, g, rec, bhh, hn, h, gLengths),
    gruBackward: (t, g, hn, h, dh, dzx, dzh) => gruCellBackward(gpu, t, N, H_SEQ, g, hn, h, dh, dzx, dzh, gLengths),
  };
}

const jsOps: SequenceOps<Float32Array> = {
  put: (a) => a.slice(),
  packB: (transB, K, n, B) => jsBackend.packB(transB, K, n, B),
  gemmPacked: (M, n, K, A, P, beta, C, ao, co) =>
    jsBackend.gemmPacked(false, M, n, K, 1, A, P as ReturnType<typeof jsBackend.packB>, beta, C, ao, co),
  lstmForward: (t, g, c, h) => jsBackend.lstmCellForward(t, N, H_SEQ, g, c, h, lengths),
  lstmBackward: (t, g, c, dh, dc, dz) => jsBackend.lstmCellBackward(t, N, H_SEQ, g, c, dh, dc, dz, lengths),
  gruForward: (t, g, rec, bhh, hn, h) => jsBackend.gruCellForward(t, N, H_SEQ, g, rec, bhh, hn, h, lengths),
  gruBackward: (t, g, hn, h, dh, dzx, dzh) => jsBackend.gruCellBackward(t, N, H_SEQ, g, hn, h, dh, dzx, dzh, lengths),
};

/** An LSTM and a GRU run forward and back as src/nn/lstmCell.ts and gruCell.ts step them: their outputs, in order. */
function sequences<A>(ops: SequenceOps<A>): A[] {
  const H = H_SEQ,
    NH = N * H;
  const zeros = (n: number) => ops.put(new Float32Array(n));
  // LSTM: g holds x·W_ihᵀ + b (inputs here), each step adds h_t·W_hhᵀ
  const whh4 = randomArray(4 * H * H, 50);
  const g = ops.put(randomArray(T * N * 4 * H, 51)),
    c = zeros((T + 1) * NH),
    h = zeros((T + 1) * NH);
  const whhT = ops.packB(true, H, 4 * H, ops.put(whh4));
  for (let t = 0; t < T; t++) {
    ops.gemmPacked(N, 4 * H, H, h, whhT, 1, g, t * NH, t * N * 4 * H);
    ops.lstmForward(t, g, c, h);
  }
  const dh = ops.put(randomArray((T + 1) * NH, 52)),
    dc = zeros(NH),
    dz = zeros(T * N * 4 * H);
  const whh = ops.packB(false, 4 * H, H, ops.put(whh4));
  for (let t = T - 1; t >= 0; t--) {
    ops.lstmBackward(t, g, c, dh, dc, dz);
    if (t > 0) ops.gemmPacked(N, H, 4 * H, dz, whh, 1, dh, t * N * 4 * H, t * NH);
  }
  // GRU: rec = h_t·W_hhᵀ per step (no bias), then the cell
  const whh3 = randomArray(3 * H * H, 60);
  const gg = ops.put(randomArray(T * N * 3 * H, 61)),
    rec = zeros(N * 3 * H),
    bhh = ops.put(randomArray(3 * H, 62)),
    hn = zeros(T * NH),
    hg = zeros((T + 1) * NH);
  const whh3T = ops.packB(true, H, 3 * H, ops.put(whh3));
  for (let t = 0; t < T; t++) {
    ops.gemmPacked(N, 3 * H, H, hg, whh3T, 0, rec, t * NH, 0);
    ops.gruForward(t, gg, rec, bhh, hn, hg);
  }
  const dhg = ops.put(randomArray((T + 1) * NH, 63)),
    dzx = zeros(T * N * 3 * H),
    dzh = zeros(T * N * 3 * H);
  const whh3p = ops.packB(false, 3 * H, H, ops.put(whh3));
  for (let t = T - 1; t >= 0; t--) {
    ops.gruBackward(t, gg, hn, hg, dhg, dzx, dzh);
    if (t > 0) ops.gemmPacked(N, H, 3 * H, dzh, whh3p, 1, dhg, t * N * 3 * H, t * NH);
  }
  return [g, c, h, dz, dh, gg, hn, hg, dzx, dzh, dhg];
}

test('LSTM and GRU sequences stepped with gemmPacked on slices of the run buffers equal js', async (t) => {
  const gpu = await gpuOrSkip(t);
  if (!gpu) return;
  const got = await gpu.read(...sequences(gpuOps(gpu, gpu.upload(lengthBits(lengths)))));
  const want = sequences(jsOps);
  const names = [
    'lstm g',
    'lstm c',
    'lstm h',
    'lstm dz',
    'lstm dh',
    'gru gates',
    'gru hn',
    'gru h',
    'gru dzx',
    'gru dzh',
    'gru dh',
  ];
  for (const [i, w] of want.entries()) assertClose(got[i]!, w, { ...gemmTol(4 * H_SEQ), what: names[i] });
});
