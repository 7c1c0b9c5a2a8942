/**
 * The webgpu attention kernels against the js backend's (src/kernels/js/attention.ts: gemms per
 * (sample, head), softmax sums in float64), each kernel on the same inputs as js: T across the
 * 64-wide workgroups and gemm blocks, odd head widths, 1 and 3 heads, causal on and off, lengths
 * with a sample of length 0, one past T and one below 0 (clamped, as js does), a batch of lengths 0,
 * and every array a view at an offset (Q, K and V of one buffer, as the layer keeps them), outputs
 * first filled with NaN.
 *
 * Tolerances: every value js computes as exactly 0 (masked keys, padded rows and what only they
 * reach) is exactly 0; the weights within 1e-6 + 1e-5·P (float32 exp and row sums); a product within
 * 1e-5 of its Σ|terms| (gemm.test.ts's bound); dS within 1e-5 of P·(|dP| + Σ|dP|·P), and dQ, dK
 * within 1e-5 of the Σ|terms| of that bound times |K|, |Q|.
 */
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import type { AttentionGeometry } from '../../src/kernels/attentionKernels.ts';
import { jsBackend } from '../../src/kernels/js/index.ts';
import {
  attentionApply,
  attentionApplyBackward,
  attentionWeights,
  attentionWeightsBackward,
} from '../../src/kernels/webgpu/attention.ts';
import type { GpuArray } from '../../src/kernels/webgpu/gpuArray.ts';
import { gpuView } from '../../src/kernels/webgpu/gpuArray.ts';
import type { GpuContext } from '../../src/kernels/webgpu/gpuContext.ts';
import { assertClose, random } from './compareArrays.ts';
import { gpuOrSkip, releaseGpu } from './gpuTest.ts';

after(releaseGpu);

interface Case {
  g: AttentionGeometry;
  lengths: number[] | null;
}

const geometry = (N: number, heads: number, T: number, headDim: number, causal: boolean) => ({
  N,
  heads,
  T,
  headDim,
  causal,
});

const CASES: Case[] = [
  { g: geometry(2, 3, 70, 5, false), lengths: [70, 33] },
  { g: geometry(2, 3, 70, 5, true), lengths: [70, 33] },
  { g: geometry(3, 1, 13, 7, true), lengths: [5, 0, 20] },
  { g: geometry(3, 1, 13, 7, false), lengths: [5, 0, 20] },
  { g: geometry(1, 3, 65, 3, true), lengths: null },
  { g: geometry(2, 1, 1, 1, false), lengths: [1, -3] },
  { g: geometry(2, 3, 4, 2, true), lengths: [0, 0] },
];

const FRONT = 3;

/** `data` as a view FRONT floats into a buffer of its own. */
function upload(gpu: GpuContext, data: Float32Array): GpuArray {
  const whole = gpu.upload(new Float32Array([...random(FRONT, 9), ...data]));
  return gpuView(whole, FRONT, data.length);
}

/** An output view at an offset, every value NaN (each kernel must write all of it). */
const nanOutput = (gpu: GpuContext, n: number) => upload(gpu, new Float32Array(n).fill(Number.NaN));

const abs = (a: Float32Array) => a.map(Math.abs);

/** Σ|terms| of op(A)·op(B) per (sample, head) block: the js gemm on absolute values. */
function absProduct(
  g: AttentionGeometry,
  ta: boolean,
  tb: boolean,
  M: number,
  N: number,
  K: number,
  A: Float32Array,
  B: Float32Array,
): Float32Array {
  const blocks = g.N * g.heads;
  const [a, b] = [abs(A), abs(B)];
  const c = new Float32Array(blocks * M * N);
  for (let s = 0; s < blocks; s++)
    jsBackend.gemm(
      ta,
      tb,
      M,
      N,
      K,
      1,
      a.subarray(s * M * K, (s + 1) * M * K),
      b.subarray(s * K * N, (s + 1) * K * N),
      0,
      c.subarray(s * M * N, (s + 1) * M * N),
    );
  return c;
}

/** |want| ≤ 1e-5 of the magnitude involved, and exactly 0 where want is. */
const relativeTo =
  (mag: Float32Array, r = 1e-5) =>
  (want: number, i: number) =>
    want === 0 ? 0 : r * mag[i]! + 1e-7;

async function checkCase(gpu: GpuContext, { g, lengths }: Case) {
  const { N, heads, T, headDim: dh } = g;
  const what = `N=${N} heads=${heads} T=${T} dh=${dh}${g.causal ? ' causal' : ''} lengths=${lengths}`;
  const size = N * heads * T * dh,
    square = N * heads * T * T;
  const lens = lengths ? Int32Array.from(lengths) : null;
  const qkv = random(3 * size, size + T, -1.5, 1.5);
  const [q, k, v] = [0, 1, 2].map((p) => qkv.subarray(p * size, (p + 1) * size)) as [
    Float32Array,
    Float32Array,
    Float32Array,
  ];
  const gQkv = upload(gpu, qkv);
  const [gq, gk, gv] = [0, 1, 2].map((p) => gpuView(gQkv, p * size, size)) as [GpuArray, GpuArray, GpuArray];

  // forward: the weights, then their mix of the values
  const probs = new Float32Array(square).fill(Number.NaN);
  jsBackend.attentionWeights(q, k, lens, g, probs);
  const gProbs = nanOutput(gpu, square);
  attentionWeights(gpu, gq, gk, lens, g, gProbs);
  const out = new Float32Array(size);
  jsBackend.attentionApply(probs, v, g, out);
  const gOut = nanOutput(gpu, size);
  attentionApply(gpu, upload(gpu, probs), gv, g, gOut);

  // backward, each pass from js's inputs
  const dout = random(size, 2 * size + 1);
  const dprobs = new Float32Array(square),
    dv = new Float32Array(size);
  jsBackend.attentionApplyBackward(probs, v, dout, g, dprobs, dv);
  const gDprobs = nanOutput(gpu, square),
    gDv = nanOutput(gpu, size);
  const gP = upload(gpu, probs);
  attentionApplyBackward(gpu, gP, gv, upload(gpu, dout), g, gDprobs, gDv);

  const dS = dprobs.slice(),
    dq = new Float32Array(size),
    dk = new Float32Array(size);
  jsBackend.attentionWeightsBackward(q, k, probs, dS, g, dq, dk);
  const gDS = upload(gpu, dprobs),
    gDq = nanOutput(gpu, size),
    gDk = nanOutput(gpu, size);
  attentionWeightsBackward(gpu, gq, gk, gP, gDS, g, gDq, gDk);

  const [got, gotOut, gotDprobs, gotDv, gotDS, gotDq, gotDk] = await gpu.read(
    gProbs,
    gOut,
    gDprobs,
    gDv,
    gDS,
    gDq,
    gDk,
  );
  assertClose(got!, probs, (w) => (w === 0 ? 0 : 1e-6 + 1e-5 * w), `${what}: probs`);
  assertClose(gotOut!, out, relativeTo(absProduct(g, false, false, T, dh, T, probs, v)), `${what}: out`);
  assertClose(gotDv!, dv, relativeTo(absProduct(g, true, false, T, dh, T, probs, dout)), `${what}: dv`);
  assertClose(gotDprobs!, dprobs, relativeTo(absProduct(g, false, true, T, T, dh, dout, v)), `${what}: dprobs`);
  // dS's bound: P·(|dP| + Σ_j |dP_j|·P_j) per row
  const dSMag = new Float32Array(square);
  for (let at = 0; at < square; at += T) {
    let dot = 0;
    for (let j = 0; j < T; j++) dot += Math.abs(dprobs[at + j]!) * probs[at + j]!;
    for (let j = 0; j < T; j++) dSMag[at + j] = probs[at + j]! * (Math.abs(dprobs[at + j]!) + dot);
  }
  assertClose(gotDS!, dS, relativeTo(dSMag), `${what}: dS`);
  const scale = 1 / Math.sqrt(dh);
  const dqMag = absProduct(g, false, false, T, dh, T, dSMag, k).map((m) => m * scale);
  const dkMag = absProduct(g, true, false, T, dh, T, dSMag, q).map((m) => m * scale);
  assertClose(gotDq!, dq, relativeTo(dqMag), `${what}: dq`);
  assertClose(gotDk!, dk, relativeTo(dkMag), `${what}: dk`);
}

test('the four attention kernels equal the js backend across workgroup edges, masks and lengths', async (t) => {
  const gpu = await gpuOrSkip(t);
  if (!gpu) return;
  for (const c of CASES) await checkCase(gpu, c);
});

test('the attention kernels refuse short arrays and lengths, and an output sharing an input buffer', async (t) => {
  const gpu = await gpuOrSkip(t);
  if (!gpu) return;
  const g = geometry(2, 2, 5, 3, false);
  const heads = gpu.array(3 * 60);
  const [q, k, v] = [0, 1, 2].map((p) => gpuView(heads, p * 60, 60)) as [GpuArray, GpuArray, GpuArray];
  const probs = gpu.array(100);
  assert.throws(
    () => attentionWeights(gpu, q, k, null, g, gpu.array(99)),
    /attentionWeights: probs holds 99 values; N=2, heads=2, T=5, headDim=3 need 100/,
  );
  assert.throws(
    () => attentionWeights(gpu, q, k, Int32Array.of(5), g, probs),
    /attentionWeights: lengths holds 1 values for N=2 samples/,
  );
  assert.throws(
    () => attentionApply(gpu, probs, v, g, q),
    /attentionApply: out shares a GPU buffer with v; give each output an allocation of its own/,
  );
  assert.throws(
    () => attentionApply(gpu, probs, v, { ...g, T: 2.5 }, gpu.array(60)),
    /N, heads, T and headDim must be integers/,
  );
  // the layer's arrays: dq and dk in one buffer, apart from q, k and dS
  const dheads = gpu.array(120);
  attentionWeightsBackward(gpu, q, k, probs, gpu.array(100), g, gpuView(dheads, 0, 60), gpuView(dheads, 60, 60));
  await gpu.read(dheads);
});
