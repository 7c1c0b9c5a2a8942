/**
 * The webgpu batch normalisation passes against the js backend: rows from 1 to past several
 * 1024-row slices (the sums' second pass), channels across the 16-column blocks, x centred far
 * from 0; then the statistics and parameters in one flat buffer, x̂ and y in another, and dx
 * written over dy. The GPU sums in float32 where js sums in float64, so each result is compared
 * to the magnitude it is made of: sums within 2e-6·Σ|terms|, x̂ within 1e-6 relative, y within
 * 1e-6·(|x̂·γ| + |β|), dx within 1e-6·|k|·(M·|dy| + |Σdy| + |x̂·Σdy·x̂|).
 * The per-channel steps (batchNormChannels.ts) in float32 where js rounds float64 once: channel
 * sums within 2e-6·Σ|x|, the mean, invStd and evaluation dx within 1e-6 relative, the running
 * statistics within 1e-6·(|momentum·running| + |(1 − momentum)·batch|), parameter gradients
 * within 1e-7·(|grad| + |sum|) (a float32 add).
 */
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { jsBackend } from '../../src/kernels/js/index.ts';
import {
  batchNormGradSums,
  batchNormInputGrad,
  batchNormNormalise,
  channelCentredSquares,
} from '../../src/kernels/webgpu/batchNorm.ts';
import {
  batchNormAffineInputGrad,
  batchNormMean,
  batchNormParamGrads,
  batchNormRunningStatistics,
  batchNormStatistics,
  channelSums,
} from '../../src/kernels/webgpu/batchNormChannels.ts';
import { gpuView } from '../../src/kernels/webgpu/gpuArray.ts';
import type { GpuContext } from '../../src/kernels/webgpu/gpuContext.ts';
import { randomArray } from '../util/close.ts';
import { gpuOrSkip, releaseGpu } from './gpuTest.ts';

after(releaseGpu);

/** |got − want| ≤ tol·scale(i) for every element. */
function assertWithin(got: Float32Array, want: Float32Array, tol: number, scale: (i: number) => number, what: string) {
  assert.equal(got.length, want.length, `${what}: length`);
  for (let i = 0; i < want.length; i++) {
    const err = Math.abs(got[i]! - want[i]!);
    if (!(err <= tol * scale(i)))
      assert.fail(`${what}[${i}]: got ${got[i]}, js ${want[i]} (allowed ${tol * scale(i)})`);
  }
}

interface Inputs {
  x: Float32Array;
  dy: Float32Array;
  mean: Float32Array;
  invStd: Float32Array;
  gamma: Float32Array;
  beta: Float32Array;
}

function inputs(rows: number, C: number, seed: number): Inputs {
  const x = randomArray(rows * C, seed).map((v, i) => 3 + (i % C) * 0.25 + v);
  const mean = new Float32Array(C),
    invStd = new Float32Array(C);
  for (let c = 0; c < C; c++) {
    let s = 0;
    for (let r = 0; r < rows; r++) s += x[r * C + c]!;
    mean[c] = s / rows;
    invStd[c] = 1 / Math.sqrt(1 / 3 + 1e-5);
  }
  const gamma = randomArray(C, seed + 1).map((v) => 1 + v / 2),
    beta = randomArray(C, seed + 2);
  return { x, dy: randomArray(rows * C, seed + 3), mean, invStd, gamma, beta };
}

/** The js results and their magnitudes. */
function expected(v: Inputs, rows: number, C: number, M: number) {
  const n = rows * C;
  const sq = new Float32Array(C),
    xhat = new Float32Array(n),
    y = new Float32Array(n),
    sums = new Float32Array(2 * C),
    dx = new Float32Array(n);
  jsBackend.channelCentredSquares(v.x, v.mean, sq, rows, C);
  jsBackend.batchNormNormalise(v.x, v.mean, v.invStd, v.gamma, v.beta, xhat, y, rows, C);
  jsBackend.batchNormGradSums(v.dy, xhat, sums, rows, C);
  jsBackend.batchNormInputGrad(v.dy, xhat, v.gamma, v.invStd, sums, M, dx, rows, C);
  // Σ|terms| of each sum (a square is its own magnitude)
  const sumScale = new Float64Array(2 * C);
  for (let i = 0; i < n; i++) {
    sumScale[i % C] += Math.abs(v.dy[i]!);
    sumScale[C + (i % C)] += Math.abs(v.dy[i]! * xhat[i]!);
  }
  const scales = {
    sq: (c: number) => sq[c]! + 1e-30,
    sums: (j: number) => sumScale[j]! + 1e-30,
    xhat: (i: number) => Math.abs(xhat[i]!) + 1e-30,
    y: (i: number) => Math.abs(xhat[i]! * v.gamma[i % C]!) + Math.abs(v.beta[i % C]!),
    dx: (i: number) => {
      const c = i % C;
      const k = Math.abs((v.gamma[c]! * v.invStd[c]!) / M);
      return k * (M * Math.abs(v.dy[i]!) + Math.abs(sums[c]!) + Math.abs(xhat[i]! * sums[C + c]!)) + 1e-30;
    },
  };
  return { sq, xhat, y, sums, dx, scales };
}

async function checkAll(gpu: GpuContext, rows: number, C: number, seed: number): Promise<void> {
  const v = inputs(rows, C, seed);
  const M = 2 * rows; // as when replicas normalise together
  const want = expected(v, rows, C, M);
  const up = (a: Float32Array) => gpu.upload(a);
  const nan = (n: number) => gpu.upload(new Float32Array(n).fill(Number.NaN));
  const [gx, gdy, gmean, ginv, ggamma, gbeta] = [v.x, v.dy, v.mean, v.invStd, v.gamma, v.beta].map(up);
  const n = rows * C;
  const gsq = nan(C),
    gxhat = nan(n),
    gy = nan(n),
    gsums = nan(2 * C),
    gdx = nan(n);
  channelCentredSquares(gpu, gx!, gmean!, gsq, rows, C);
  batchNormNormalise(gpu, gx!, gmean!, ginv!, ggamma!, gbeta!, gxhat, gy, rows, C);
  // the backward passes read js's x̂ and sums, so that each kernel is judged on its own
  const gxhatJs = up(want.xhat),
    gsumsJs = up(want.sums);
  batchNormGradSums(gpu, gdy!, gxhatJs, gsums, rows, C);
  batchNormInputGrad(gpu, gdy!, gxhatJs, ggamma!, ginv!, gsumsJs, M, gdx, rows, C);
  const [sq, xhat, y, sums, dx] = await gpu.read(gsq, gxhat, gy, gsums, gdx);
  const what = `${rows} rows × ${C}`;
  assertWithin(sq!, want.sq, 2e-6, want.scales.sq, `${what} centred squares`);
  assertWithin(xhat!, want.xhat, 1e-6, want.scales.xhat, `${what} x̂`);
  assertWithin(y!, want.y, 1e-6, want.scales.y, `${what} y`);
  assertWithin(sums!, want.sums, 2e-6, want.scales.sums, `${what} grad sums`);
  assertWithin(dx!, want.dx, 1e-6, want.scales.dx, `${what} dx`);
}

test('batch norm passes equal the js backend from 1 row to several slices of rows', async (t) => {
  const gpu = await gpuOrSkip(t);
  if (!gpu) return;
  let seed = 1;
  for (const [rows, C] of [
    [1, 1],
    [7, 3],
    [1000, 17],
    [1024, 16],
    [5000, 33],
    [70000, 2],
  ] as const)
    await checkAll(gpu, rows, C, (seed += 10));
});

test('batch norm on views: statistics and parameters in one buffer, x̂ and y in another, dx over dy', async (t) => {
  const gpu = await gpuOrSkip(t);
  if (!gpu) return;
  const rows = 2100,
    C = 5,
    n = rows * C;
  const v = inputs(rows, C, 77);
  const want = expected(v, rows, C, rows);
  // [mean, invStd, gamma, beta] after one spare float, then the squares and sums written after them
  const stats = gpu.upload(
    new Float32Array([0, ...v.mean, ...v.invStd, ...v.gamma, ...v.beta, ...new Float32Array(3 * C)]),
  );
  const view = (k: number, len = C) => gpuView(stats, 1 + k * C, len);
  const gx = gpuView(gpu.upload(new Float32Array([0, 0, ...v.x])), 2, n);
  const outs = gpu.upload(new Float32Array(3 + 2 * n).fill(Number.NaN));
  const gxhat = gpuView(outs, 1, n),
    gy = gpuView(outs, 2 + n, n);
  channelCentredSquares(gpu, gx, view(0), view(4), rows, C);
  batchNormNormalise(gpu, gx, view(0), view(1), view(2), view(3), gxhat, gy, rows, C);
  // dy and x̂ (js's) side by side; the grad sums into the stats buffer; dx over dy itself
  const back = gpu.upload(new Float32Array([...v.dy, ...want.xhat]));
  const gdy = gpuView(back, 0, n),
    gxhatJs = gpuView(back, n, n);
  batchNormGradSums(gpu, gdy, gxhatJs, view(5, 2 * C), rows, C);
  const [sums] = await gpu.read(view(5, 2 * C));
  batchNormInputGrad(gpu, gdy, gxhatJs, view(2), view(1), gpu.upload(want.sums), rows, gdy, rows, C);
  const [st, out, dx] = await gpu.read(stats, outs, gdy);
  assertWithin(st!.subarray(1 + 4 * C, 1 + 5 * C), want.sq, 2e-6, want.scales.sq, 'centred squares');
  assertWithin(out!.subarray(1, 1 + n), want.xhat, 1e-6, want.scales.xhat, 'x̂');
  assertWithin(out!.subarray(2 + n, 2 + 2 * n), want.y, 1e-6, want.scales.y, 'y');
  assertWithin(sums!, want.sums, 2e-6, want.scales.sums, 'grad sums');
  assertWithin(dx!, want.dx, 1e-6, want.scales.dx, 'dx over dy');
  for (const i of [0, 1 + n, 2 + 2 * n]) assert.ok(Number.isNaN(out![i]!), `output buffer [${i}] written`);
});

/** The per-channel steps on `rows` × `C`, run against js; every pair of state or gradient arrays views one buffer. */
async function checkChannelSteps(gpu: GpuContext, rows: number, C: number, seed: number): Promise<void> {
  const what = `${rows} rows × ${C}`;
  const n = rows * C;
  const x = randomArray(n, seed).map((v, i) => 3 + (i % C) * 0.25 + v);
  // channel sums into an array one longer than C, whose last slot (the row count's) stays
  const sums = new Float32Array(C + 1).fill(-9);
  jsBackend.channelSums(x, sums, rows, C);
  const gsums = gpu.upload(new Float32Array(C + 1).fill(Number.NaN));
  gpu.upload(new Float32Array([-9]), gpuView(gsums, C, 1));
  channelSums(gpu, gpu.upload(x), gsums, rows, C);
  const absSum = new Float64Array(C);
  for (let i = 0; i < n; i++) absSum[i % C] += Math.abs(x[i]!);
  const relative = (a: ArrayLike<number>) => (i: number) => Math.abs(a[i]!) + 1e-30;

  const mean = new Float32Array(C);
  jsBackend.batchNormMean(sums, rows, mean, C);
  const gmean = gpu.upload(new Float32Array(C).fill(Number.NaN));
  batchNormMean(gpu, gpu.upload(sums), rows, gmean, C);

  // the statistics from js's mean and some squares; running statistics [mean…, var…] in one buffer
  const squares = randomArray(C, seed + 1).map((v) => (v + 1) * rows);
  const running = randomArray(2 * C, seed + 2).map((v, i) => (i < C ? v : 1 + v / 2));
  const momentum = 0.9,
    epsilon = 1e-5;
  const invStd = new Float32Array(C),
    newRunning = running.slice();
  jsBackend.batchNormStatistics(
    squares,
    rows,
    mean,
    momentum,
    epsilon,
    invStd,
    newRunning.subarray(0, C),
    newRunning.subarray(C),
    C,
  );
  const ginvStd = gpu.upload(new Float32Array(C).fill(Number.NaN));
  const grunning = gpu.upload(running);
  batchNormStatistics(
    gpu,
    gpu.upload(squares),
    rows,
    gpu.upload(mean),
    momentum,
    epsilon,
    ginvStd,
    gpuView(grunning, 0, C),
    gpuView(grunning, C, C),
    C,
  );
  const batch = (i: number) => {
    const c = i % C;
    if (i < C) return mean[c]!;
    const variance = rows > 0 ? squares[c]! / rows : 0;
    return rows > 1 ? (variance * rows) / (rows - 1) : variance;
  };
  const runningScale = (i: number) => Math.abs(momentum * running[i]!) + Math.abs((1 - momentum) * batch(i)) + 1e-30;

  // evaluation mode's statistics from the updated running ones, into [mean…, invStd…] of one buffer
  const evalStats = new Float32Array(2 * C);
  jsBackend.batchNormRunningStatistics(
    newRunning.subarray(0, C),
    newRunning.subarray(C),
    epsilon,
    evalStats.subarray(0, C),
    evalStats.subarray(C),
    C,
  );
  const gevalStats = gpu.upload(new Float32Array(2 * C).fill(Number.NaN));
  const grunningJs = gpu.upload(newRunning);
  batchNormRunningStatistics(
    gpu,
    gpuView(grunningJs, 0, C),
    gpuView(grunningJs, C, C),
    epsilon,
    gpuView(gevalStats, 0, C),
    gpuView(gevalStats, C, C),
    C,
  );

  // parameter gradients accumulated into [dgamma…, dbeta…] of one buffer
  const gradSums = randomArray(2 * C, seed + 3).map((v) => v * rows);
  const grads = randomArray(2 * C, seed + 4),
    newGrads = grads.slice();
  jsBackend.batchNormParamGrads(gradSums, newGrads.subarray(0, C), newGrads.subarray(C), C);
  const ggrads = gpu.upload(grads);
  batchNormParamGrads(gpu, gpu.upload(gradSums), gpuView(ggrads, 0, C), gpuView(ggrads, C, C), C);
  const gradScale = (i: number) => {
    const sum = i < C ? gradSums[C + i]! : gradSums[i - C]!;
    return 1e-7 * (Math.abs(grads[i]!) + Math.abs(sum)) + 1e-30;
  };

  // evaluation mode's dx, written over dy
  const dy = randomArray(n, seed + 5),
    gamma = randomArray(C, seed + 6).map((v) => 1 + v / 2);
  const dx = new Float32Array(n);
  jsBackend.batchNormAffineInputGrad(dy, gamma, invStd, dx, rows, C);
  const gdy = gpu.upload(dy);
  batchNormAffineInputGrad(gpu, gdy, gpu.upload(gamma), gpu.upload(invStd), gdy, rows, C);

  const [gotSums, gotMean, gotInvStd, gotRunning, gotEval, gotGrads, gotDx] = await gpu.read(
    gsums,
    gmean,
    ginvStd,
    grunning,
    gevalStats,
    ggrads,
    gdy,
  );
  assertWithin(gotSums!.subarray(0, C), sums.subarray(0, C), 2e-6, (c) => absSum[c]! + 1e-30, `${what} channel sums`);
  assert.equal(gotSums![C], -9, `${what}: channelSums wrote past C`);
  assertWithin(gotMean!, mean, 1e-6, relative(mean), `${what} mean`);
  assertWithin(gotInvStd!, invStd, 1e-6, relative(invStd), `${what} invStd`);
  assertWithin(gotRunning!, newRunning, 1e-6, runningScale, `${what} running statistics`);
  assertWithin(gotEval!, evalStats, 1e-6, relative(evalStats), `${what} evaluation statistics`);
  assertWithin(gotGrads!, newGrads, 1, gradScale, `${what} parameter gradients`);
  assertWithin(gotDx!, dx, 1e-6, relative(dx), `${what} evaluation dx over dy`);
}

test('batch norm per-channel steps equal the js backend, state and gradients as views of one buffer', async (t) => {
  const gpu = await gpuOrSkip(t);
  if (!gpu) return;
  let seed = 500;
  for (const [rows, C] of [
    [0, 3],
    [1, 1],
    [2, 5],
    [1500, 17],
    [70000, 2],
    [40, 130],
  ] as const)
    await checkChannelSteps(gpu, rows, C, (seed += 10));
});
