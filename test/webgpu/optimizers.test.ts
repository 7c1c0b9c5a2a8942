/**
 * The webgpu optimizer steps against the js backend: Adam and AdamW (with and without weight decay,
 * early and late steps for the bias correction), SGD plain, with momentum and Nesterov, over several
 * steps, with the parameters and their state as views of one flat buffer. Tolerances (float32
 * against the js backend's float64 arithmetic, gradients in [−1, 1]): m and velocity 1e-6 and
 * 6e-6 (their terms cancel, so relative to the gradients' size), v 2e-6 of |v| (no cancellation);
 * parameters 2 ulp of |p| plus 2e-6 of the steps' size (lr per Adam step, lr·(1 + μ)·|g| per SGD step).
 */
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { jsBackend } from '../../src/kernels/js/index.ts';
import type { AdamParams, SgdParams } from '../../src/kernels/optimizerKernels.ts';
import { gpuView } from '../../src/kernels/webgpu/gpuArray.ts';
import { adamStep, sgdStep } from '../../src/kernels/webgpu/optimizers.ts';
import { assertClose, random, ulp } from './compareArrays.ts';
import { gpuOrSkip, releaseGpu } from './gpuTest.ts';

after(releaseGpu);

/** n values each of params, grads and two state arrays, laid out with gaps in one flat array. */
function layout(n: number, seed: number): { flat: Float32Array; at: number[] } {
  const at = [3, 3 + n + 1, 3 + 2 * n + 5, 3 + 3 * n + 7];
  const flat = random(4 * n + 11, seed, -1, 1);
  // moments start at zero (v must be ≥ 0), as a fresh optimizer's
  flat.fill(0, at[2]!, at[2]! + n).fill(0, at[3]!, at[3]! + n);
  return { flat, at };
}

test('adamStep: Adam and AdamW over several steps equal the js backend', async (t) => {
  const gpu = await gpuOrSkip(t);
  if (!gpu) return;
  for (const n of [1, 100, 1000]) {
    for (const [decoupled, weightDecay] of [
      [false, 0],
      [false, 0.01],
      [true, 0.1],
    ] as const) {
      const { flat, at } = layout(n, n);
      const cpu = flat.slice();
      const view = (a: Float32Array, k: number) => a.subarray(at[k]!, at[k]! + n);
      const g = gpu.upload(flat);
      const gv = (k: number) => gpuView(g, at[k]!, n);
      for (let step = 1; step <= 4; step++) {
        const p: AdamParams = { lr: 1e-2, beta1: 0.9, beta2: 0.999, eps: 1e-8, weightDecay, decoupled, step };
        // fresh gradients each step, the same on both sides
        view(cpu, 1).set(random(n, 100 * step + n, -1, 1));
        gpu.upload(view(cpu, 1), gv(1));
        jsBackend.adamStep(view(cpu, 0), view(cpu, 1), view(cpu, 2), view(cpu, 3), p);
        adamStep(gpu, gv(0), gv(1), gv(2), gv(3), p);
      }
      const [params, m, v] = await gpu.read(gv(0), gv(2), gv(3));
      const what = `n=${n} decoupled=${decoupled} wd=${weightDecay}`;
      // m's terms cancel: its error is relative to their size, |g| ≤ 1
      assertClose(m!, view(cpu, 2), () => 1e-6, `${what}: m`);
      assertClose(v!, view(cpu, 3), (w) => 2e-6 * Math.abs(w) + 1e-15, `${what}: v`);
      // each step moves p by at most about lr (Adam's update is ~1 in size)
      assertClose(params!, view(cpu, 0), (w) => 2 * ulp(w) + 2e-6 * 4 * 1e-2 * (1 + weightDecay), `${what}: params`);
    }
  }
});

test('adamStep: a late step (bias corrections near 1), and a step count below 1 is refused', async (t) => {
  const gpu = await gpuOrSkip(t);
  if (!gpu) return;
  const n = 300;
  const params = random(n, 1),
    grads = random(n, 2),
    m = random(n, 3, -0.1, 0.1),
    v = random(n, 4, 0, 0.01);
  const p: AdamParams = {
    lr: 3e-4,
    beta1: 0.9,
    beta2: 0.98,
    eps: 1e-6,
    weightDecay: 0.05,
    decoupled: true,
    step: 10000,
  };
  const gp = gpu.upload(params),
    gm = gpu.upload(m),
    gvv = gpu.upload(v);
  adamStep(gpu, gp, gpu.upload(grads), gm, gvv, p);
  jsBackend.adamStep(params, grads, m, v, p);
  const [gotP, gotM, gotV] = await gpu.read(gp, gm, gvv);
  assertClose(gotM!, m, () => 1e-6, 'm');
  assertClose(gotV!, v, (w) => 2e-6 * Math.abs(w), 'v');
  assertClose(gotP!, params, (w) => 2 * ulp(w) + 2e-6 * p.lr * 2, 'params');
  assert.throws(() => adamStep(gpu, gp, gp, gm, gvv, { ...p, step: 0 }), /step must be 1-based, got 0/);
  assert.throws(() => adamStep(gpu, gp, gpuView(gm, 0, 10), gm, gvv, p), /grads has 10 values, params 300/);
});

test('sgdStep: plain, momentum and Nesterov over several steps equal the js backend', async (t) => {
  const gpu = await gpuOrSkip(t);
  if (!gpu) return;
  for (const n of [1, 65, 1000]) {
    for (const [momentum, nesterov, weightDecay] of [
      [0, false, 0],
      [0, false, 1e-3],
      [0.9, false, 0],
      [0.9, true, 1e-4],
    ] as const) {
      const { flat, at } = layout(n, n + 7);
      const cpu = flat.slice();
      const view = (a: Float32Array, k: number) => a.subarray(at[k]!, at[k]! + n);
      const g = gpu.upload(flat);
      const gv = (k: number) => gpuView(g, at[k]!, n);
      const p: SgdParams = { lr: 0.05, momentum, nesterov, weightDecay };
      for (let step = 1; step <= 3; step++) {
        view(cpu, 1).set(random(n, 10 * step + n, -1, 1));
        gpu.upload(view(cpu, 1), gv(1));
        jsBackend.sgdStep(view(cpu, 0), view(cpu, 1), momentum > 0 ? view(cpu, 2) : null, p);
        sgdStep(gpu, gv(0), gv(1), momentum > 0 ? gv(2) : null, p);
      }
      const [params, velocity] = await gpu.read(gv(0), gv(2));
      const what = `n=${n} momentum=${momentum} nesterov=${nesterov} wd=${weightDecay}`;
      // velocity: up to 3 gradients of size ≤ 1; each step moves p by ≤ lr·(1 + μ)·3
      assertClose(velocity!, view(cpu, 2), () => 6e-6, `${what}: velocity`);
      assertClose(params!, view(cpu, 0), (w) => 2 * ulp(w) + 2e-6 * p.lr * 6 * 3, `${what}: params`);
    }
  }
  const a = gpu.array(4);
  assert.throws(
    () => sgdStep(gpu, a, a, null, { lr: 1, momentum: 0.9, nesterov: false, weightDecay: 0 }),
    /momentum > 0 needs a velocity buffer/,
  );
});
