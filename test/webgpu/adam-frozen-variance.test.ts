/**
 * The webgpu adamStep with 1-bit Adam's frozen variance (AdamParams.varianceFrozenAt) against the js
 * backend: v never below what the plain steps made it, raised where the momentum outgrows it, and
 * v, m and the parameters within the tolerances of optimizers.test.ts.
 */
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { jsBackend } from '../../src/kernels/js/index.ts';
import type { AdamParams } from '../../src/kernels/optimizerKernels.ts';
import { gpuView } from '../../src/kernels/webgpu/gpuArray.ts';
import { adamStep } from '../../src/kernels/webgpu/optimizers.ts';
import { assertClose, random, ulp } from './compareArrays.ts';
import { gpuOrSkip, releaseGpu } from './gpuTest.ts';

after(releaseGpu);

test('adamStep with varianceFrozenAt: v only rises from where it froze; v, m and params equal the js backend', async (t) => {
  const gpu = await gpuOrSkip(t);
  if (!gpu) return;
  for (const n of [1, 100, 1000]) {
    for (const decoupled of [false, true]) {
      // params, grads, m, v as views of one flat buffer, with gaps
      const at = [3, 3 + n + 1, 3 + 2 * n + 5, 3 + 3 * n + 7];
      const cpu = random(4 * n + 11, n, -1, 1);
      cpu.fill(0, at[2]!, at[2]! + n).fill(0, at[3]!, at[3]! + n);
      const view = (k: number) => cpu.subarray(at[k]!, at[k]! + n);
      const g = gpu.upload(cpu);
      const gv = (k: number) => gpuView(g, at[k]!, n);
      let frozen: Float32Array | undefined;
      for (let step = 1; step <= 6; step++) {
        const p: AdamParams = { lr: 1e-2, beta1: 0.9, beta2: 0.999, eps: 1e-8, weightDecay: 0.01, decoupled, step };
        if (step > 2) p.varianceFrozenAt = 2;
        // after the freeze, larger gradients: some elements' momentum outgrows their frozen variance
        view(1).set(random(n, 100 * step + n, step > 2 ? -3 : -1, step > 2 ? 3 : 1));
        gpu.upload(view(1), gv(1));
        jsBackend.adamStep(view(0), view(1), view(2), view(3), p);
        adamStep(gpu, gv(0), gv(1), gv(2), gv(3), p);
        if (step === 2) frozen = (await gpu.read(gv(3)))[0]!.slice();
      }
      const [params, m, v] = await gpu.read(gv(0), gv(2), gv(3));
      const what = `n=${n} decoupled=${decoupled}`;
      assert.ok(
        v!.every((x, i) => x >= frozen![i]!),
        `${what}: v never below what the second step left`,
      );
      if (n > 1)
        assert.ok(
          v!.some((x, i) => x > frozen![i]!),
          `${what}: some of v raised by the momentum`,
        );
      assertClose(m!, view(2), () => 1e-6, `${what}: m`);
      assertClose(v!, view(3), (w) => 2e-6 * Math.abs(w) + 1e-15, `${what}: v`);
      // float32 against js's float64 over 6 steps of up to lr, where max() may pick the other side of a tie
      assertClose(params!, view(0), (w) => 2 * ulp(w) + 2e-6 * 6 * 4e-2, `${what}: params`);
    }
  }
});
