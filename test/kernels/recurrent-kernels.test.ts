/**
 * The recurrent kernels of every backend against the js reference (src/kernels/js/recurrent.ts) and
 * against the definitions:
 * - packB + gemmPacked equal gemm (the naive reference) for every transpose, alpha/beta, offsets,
 *   shapes past the wasm blocking (K > 384, N > 1024) and odd edges; a pack is refilled in place and
 *   refused by another backend; native also without its packed kernel (PARATRAIN_NATIVE_PACKED=0);
 * - the LSTM and GRU cell steps (forward and backward) on a time-major run with padded samples
 *   (lengths 0 … T): every output buffer equals js's, WHOLE — so blocks of other steps and the gates
 *   of padded rows, filled with sentinels, are unchanged, and padded rows are 0 where the contract
 *   says so; H = 3, 4 and 9 run the SIMD lanes and the scalar tail;
 * - σ and tanh over [−30, 30] (and NaN) against float64 Math.
 * Tolerances: cells rtol 2e-6, atol 2e-7 (float32 SIMD approximations, a few ulp, against float64
 * loops); activations 4e-7 relative; gemms as test/kernels/addon-gemm.test.ts.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { Backend } from '../../src/kernels/backend.ts';
import { jsBackend } from '../../src/kernels/js/index.ts';
import { assertClose, randomArray } from '../util/close.ts';
import { referenceBackend as ref } from './reference.ts';
import { availableBackends } from '../nn/sequenceHelpers.ts';
import { createNativeBackend } from '../../src/kernels/native/index.ts';
import { put, putInt, toHost } from './backendArrays.ts';

const backends = (await availableBackends()).filter((b) => b.name !== 'js');
const all = [jsBackend, ...backends];

// native without its packed kernel (as on a CPU without AVX-512F): cblas_sgemm per step
process.env.PARATRAIN_NATIVE_PACKED = '0';
const nativeFallback = await createNativeBackend();
delete process.env.PARATRAIN_NATIVE_PACKED;
if (nativeFallback) assert.equal(nativeFallback.packedKernel, null);

const sig = (v: number): number => 1 / (1 + Math.exp(-v));
const gemmTol = (K: number, alpha: number) => ({
  rtol: 1e-5,
  atol: 2e-6 * (1 + Math.sqrt(K)) * Math.max(1, Math.abs(alpha)),
});

const packers: [string, Backend][] = [
  ...all.map((b): [string, Backend] => [b.name, b]),
  ...(nativeFallback ? [['native (cblas_sgemm per step)', nativeFallback] as [string, Backend]] : []),
];
for (const [label, b] of packers) {
  test(`packB + gemmPacked equal gemm on ${label}: transposes, alpha/beta, offsets, blocking edges`, async () => {
    // K = 512 and M = 512: rows of A (and of B) 512 floats apart, which onednn copies into longer rows without AVX-512
    const shapes: [number, number, number][] = [
      [1, 1, 1],
      [5, 13, 7],
      [4, 8, 4],
      [9, 1030, 3],
      [6, 17, 600],
      [32, 64, 32],
      [3, 9, 512],
      [512, 4, 2],
    ];
    let seed = 1;
    for (const [M, N, K] of shapes) {
      for (const transA of [false, true]) {
        for (const transB of [false, true]) {
          for (const [alpha, beta] of [
            [1, 1],
            [1, 0],
            [-0.5, 0.5],
          ] as const) {
            const A = randomArray(M * K, seed++),
              B = randomArray(K * N, seed++),
              C0 = randomArray(M * N, seed++);
            const want = C0.slice();
            ref.gemm(transA, transB, M, N, K, alpha, A, B, beta, want);
            // A and C at offsets into larger arrays, as a step's block of a time-major buffer
            const aOff = 3,
              cOff = 5;
            const Ab = put(b, [...new Float32Array(aOff), ...A, 7, 7]);
            const Cb = put(b, [...new Float32Array(cOff).fill(9), ...C0, 9]);
            const P = b.packB(transB, K, N, put(b, B));
            assert.equal(P.backend, b.name);
            b.gemmPacked(transA, M, N, K, alpha, Ab, P, beta, Cb, aOff, cOff);
            await toHost(b, Cb);
            const what = `gemmPacked(${transA}, ${transB}, M=${M}, N=${N}, K=${K}, ${alpha}, ${beta}) on ${label}`;
            // onednn: the product ran on the pack in the primitive's layout, not the fallback (a silent fallback is only slower)
            if (label === 'onednn')
              assert.equal((P as unknown as { packedFor: string }).packedFor, `${transA},${M}`, `${what}: packed`);
            assertClose(Cb.subarray(cOff, cOff + M * N), want, { ...gemmTol(K, alpha), what });
            assert.deepStrictEqual(
              [...Cb.subarray(0, cOff), Cb[cOff + M * N]],
              [9, 9, 9, 9, 9, 9],
              `${what}: outside C untouched`,
            );
          }
        }
      }
    }
  });

  test(`a pack on ${label} is refilled in place, serves products of any M, and is refused elsewhere`, async () => {
    const K = 5,
      N = 11,
      M = 3;
    const B1 = put(b, randomArray(K * N, 1)),
      B2 = put(b, randomArray(K * N, 2)),
      A = put(b, randomArray((M + 1) * K, 3));
    const P = b.packB(false, K, N, B1);
    const C = b.alloc((M + 1) * N),
      want = new Float32Array((M + 1) * N);
    // a product with B1 first (onednn reorders B for the first product's shape), then B2 in the same pack
    b.gemmPacked(false, M, N, K, 1, A, P, 0, C);
    await toHost(b, C);
    ref.gemm(false, false, M, N, K, 1, A, B1, 0, want);
    assertClose(C.subarray(0, M * N), want.subarray(0, M * N), gemmTol(K, 1));
    const P2 = b.packB(false, K, N, B2, P);
    assert.equal(P2, P, 'same size: the pack is reused');
    b.gemmPacked(false, M, N, K, 1, A, P2, 0, C);
    await toHost(b, C);
    ref.gemm(false, false, M, N, K, 1, A, B2, 0, want);
    assertClose(C.subarray(0, M * N), want.subarray(0, M * N), gemmTol(K, 1));
    // products of another shape from the same pack, and back
    for (const rows of [M + 1, M]) {
      b.gemmPacked(false, rows, N, K, 1, A, P2, 0, C);
      await toHost(b, C);
      ref.gemm(false, false, rows, N, K, 1, A, B2, 0, want);
      assertClose(C.subarray(0, rows * N), want.subarray(0, rows * N), { ...gemmTol(K, 1), what: `M=${rows}` });
    }
    assert.throws(() => b.gemmPacked(false, M, N + 1, K, 1, A, P2, 0, b.alloc(M * (N + 1))), /pack is 5×11/);
    // A and C in the other backend's memory, so that the pack is all it can refuse
    for (const other of packers.map(([, o]) => o).filter((o) => o !== b && o.name !== b.name)) {
      const Ao = put(other, A),
        Co = other.alloc(M * N);
      assert.throws(() => other.gemmPacked(false, M, N, K, 1, Ao, P2, 0, Co), /pack was made by/);
    }
  });
}

/** A time-major run: N samples, T steps, H units, lengths with padding (one empty sample). */
const N = 5,
  T = 4,
  LENGTHS = [4, 2, 0, 3, 1];
const cellTol = { rtol: 2e-6, atol: 2e-7 };

interface Buffers {
  [name: string]: Float32Array;
}

/** Every buffer of a cell step, random (scaled) with sentinel values everywhere; the same on every backend. */
function cellBuffers(H: number, G: number, seed: number): Buffers {
  const rows = T * N,
    states = (T + 1) * N * H;
  return {
    gates: randomArray(rows * G * H, seed).map((v) => 4 * v),
    // activations in (0, 1), what backward reads
    acts: randomArray(rows * G * H, seed + 9).map((v) => sig(3 * v)),
    c: randomArray(states, seed + 1).map((v) => 2 * v),
    h: randomArray(states, seed + 2),
    dh: randomArray(states, seed + 3),
    dc: randomArray(N * H, seed + 4),
    dz: randomArray(rows * G * H, seed + 5).fill(123),
    rec: randomArray(N * G * H, seed + 6).map((v) => 2 * v),
    bhh: randomArray(G * H, seed + 7),
    hn: randomArray(rows * H, seed + 8).fill(-5),
    dzx: new Float32Array(rows * G * H).fill(77),
    dzh: new Float32Array(rows * G * H).fill(-77),
  };
}

function onBackend(b: Backend, bufs: Buffers): Buffers {
  return Object.fromEntries(Object.entries(bufs).map(([k, v]) => [k, put(b, v)]));
}

/** Runs `step` for t = T−1 … 0 or 0 … T−1 on js and on b; every buffer must match. */
async function compareCells(
  b: Backend,
  H: number,
  G: number,
  forward: boolean,
  step: (k: Backend, t: number, x: Buffers, lengths: Int32Array) => void,
  what: string,
): Promise<void> {
  const init = cellBuffers(H, G, 10 * H + G);
  const js = onBackend(jsBackend, init),
    ours = onBackend(b, init);
  const lj = putInt(jsBackend, LENGTHS),
    lb = putInt(b, LENGTHS);
  for (let s = 0; s < T; s++) {
    const t = forward ? s : T - 1 - s;
    step(jsBackend, t, js, lj);
    step(b, t, ours, lb);
  }
  await toHost(b, ...Object.values(ours));
  for (const k of Object.keys(init))
    assertClose(ours[k]!, js[k]!, { ...cellTol, what: `${what} H=${H} on ${b.name}: ${k}` });
}

for (const b of backends) {
  test(`lstm and gru cell steps on ${b.name} equal js's, padded rows included`, async () => {
    for (const H of [3, 4, 9, 17]) {
      await compareCells(
        b,
        H,
        4,
        true,
        (k, t, x, l) => k.lstmCellForward(t, N, H, x.gates!, x.c!, x.h!, l),
        'lstmCellForward',
      );
      await compareCells(
        b,
        H,
        4,
        false,
        (k, t, x, l) => k.lstmCellBackward(t, N, H, x.acts!, x.c!, x.dh!, x.dc!, x.dz!, l),
        'lstmCellBackward',
      );
      await compareCells(
        b,
        H,
        3,
        true,
        (k, t, x, l) => k.gruCellForward(t, N, H, x.gates!, x.rec!, x.bhh!, x.hn!, x.h!, l),
        'gruCellForward',
      );
      await compareCells(
        b,
        H,
        3,
        false,
        (k, t, x, l) => k.gruCellBackward(t, N, H, x.acts!, x.hn!, x.h!, x.dh!, x.dzx!, x.dzh!, l),
        'gruCellBackward',
      );
    }
  });
}

for (const b of all) {
  test(`lstm cell on ${b.name}: padding gives zero states and gradients, other steps untouched`, async () => {
    const H = 5,
      G4 = 4 * H,
      t = 2;
    const x = onBackend(b, cellBuffers(H, 4, 3));
    const before = Object.fromEntries(Object.entries(x).map(([k, v]) => [k, v.slice()]));
    const lengths = putInt(b, LENGTHS);
    b.lstmCellForward(t, N, H, x.gates!, x.c!, x.h!, lengths);
    b.lstmCellBackward(t, N, H, x.gates!, x.c!, x.dh!, x.dc!, x.dz!, lengths);
    await toHost(b, ...Object.values(x));
    for (let n = 0; n < N; n++) {
      const out = ((t + 1) * N + n) * H,
        padded = t >= LENGTHS[n]!;
      const rowOf = (a: Float32Array, at: number, w: number) => [...a.subarray(at, at + w)];
      if (padded) {
        assert.deepStrictEqual(rowOf(x.h!, out, H), Array(H).fill(0), `h of padded sample ${n}`);
        assert.deepStrictEqual(rowOf(x.c!, out, H), Array(H).fill(0), `c of padded sample ${n}`);
        assert.deepStrictEqual(rowOf(x.dz!, (t * N + n) * G4, G4), Array(G4).fill(0), `dz of padded sample ${n}`);
        assert.deepStrictEqual(rowOf(x.dc!, n * H, H), Array(H).fill(0), `dc of padded sample ${n}`);
        assert.deepStrictEqual(
          rowOf(x.gates!, (t * N + n) * G4, G4),
          rowOf(before.gates!, (t * N + n) * G4, G4),
          `gates of padded sample ${n}`,
        );
      }
    }
    // other steps' blocks are untouched
    const NH = N * H;
    assert.deepStrictEqual([...x.h!.subarray(0, (t + 1) * NH)], [...before.h!.subarray(0, (t + 1) * NH)]);
    assert.deepStrictEqual([...x.c!.subarray(0, (t + 1) * NH)], [...before.c!.subarray(0, (t + 1) * NH)]);
    assert.deepStrictEqual([...x.dz!.subarray(0, t * N * G4)], [...before.dz!.subarray(0, t * N * G4)]);
  });

  test(`σ and tanh in the lstm cell on ${b.name} are within a few ulp of float64 Math, NaN propagates`, async () => {
    // one sample, H values per gate: gates i, f, o see v, g sees v; c₋₁ = 0 so c = i·g, h = o·tanh(c)
    const values = [...Array(601).keys()]
      .map((k) => (k - 300) / 10)
      .concat([1e-6, -1e-6, 0.6249, 0.6251, 88, -88, 100, -100]);
    const H = values.length + 4; // a tail past the SIMD lanes, 4 or 8 wide
    // NaN in the first lane (in SIMD) and the last (in the tail)
    const vals = [NaN, ...values, 0.5, -0.5, NaN];
    const gates = put(b, [...vals, ...vals, ...vals, ...vals]);
    const c = b.alloc(2 * H),
      h = b.alloc(2 * H);
    b.lstmCellForward(0, 1, H, gates, c, h, putInt(b, [1]));
    await toHost(b, gates, c, h);
    for (let j = 0; j < H; j++) {
      const v = Math.fround(vals[j]!);
      const s = gates[j]!,
        g = gates[2 * H + j]!;
      if (Number.isNaN(v)) {
        assert.ok(
          Number.isNaN(s) && Number.isNaN(g) && Number.isNaN(h[H + j]!),
          `NaN at lane ${j} of ${b.name} must propagate`,
        );
        continue;
      }
      const es = sig(v),
        eg = Math.tanh(v);
      assert.ok(Math.abs(s - es) <= 4e-7 * Math.abs(es) + 1e-38, `σ(${v}) on ${b.name}: ${s} vs ${es}`);
      assert.ok(Math.abs(g - eg) <= 4e-7 * Math.abs(eg), `tanh(${v}) on ${b.name}: ${g} vs ${eg}`);
    }
  });
}
