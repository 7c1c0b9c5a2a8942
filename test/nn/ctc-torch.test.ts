import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { jsBackend } from '../../src/kernels/js/index.ts';
import { Tensor } from '../../src/tensor/tensor.ts';
import { CtcLoss, ctcGradScale, ctcReducedLoss, type CtcReduction } from '../../src/ctc/ctcLoss.ts';
import { assertClose } from '../util/close.ts';

// Made by test/nn/fixtures/ctc-torch.py (torch 1.13, float64 from the stored float32 logits).
interface Case {
  name: string;
  T: number;
  C: number;
  blank: number;
  zeroInfinity: boolean;
  inputLengths: number[];
  labelLengths: number[];
  labels: number[];
  logits: number[];
  losses: number[];
  reductions: Record<CtcReduction, { loss: number; grad: number[] }>;
}
const fixture = JSON.parse(readFileSync(new URL('./fixtures/ctc-torch.json', import.meta.url), 'utf8')) as {
  cases: Case[];
};

test("CTC loss equals PyTorch ctc_loss: per-sample losses, each reduction's loss and gradient, zero_infinity, blank last", () => {
  // tolerances: losses rtol 1e-9 (both float64 from the same float32 logits); gradients are
  // float32 here: atol 1e-6 + rtol 1e-5
  for (const c of fixture.cases) {
    const n = c.inputLengths.length;
    const logits = new Tensor([n, c.T, c.C], Float32Array.from(c.logits));
    const targets = {
      labels: Int32Array.from(c.labels),
      labelLengths: Int32Array.from(c.labelLengths),
      inputLengths: Int32Array.from(c.inputLengths),
    };
    for (const reduction of ['sum', 'mean', 'batchMean'] as const) {
      const loss = new CtcLoss(jsBackend, { blank: c.blank, reduction, zeroInfinity: c.zeroInfinity });
      const r = loss.compute(logits, targets, ctcGradScale(reduction, 1 / n, n));
      const what = `${c.name} ${reduction}`;
      assertClose(r.losses, c.losses, { rtol: 1e-9, atol: 1e-12, what: `${what} per-sample losses` });
      const reduced = ctcReducedLoss(reduction, r.lossSum, n),
        expected = c.reductions[reduction].loss;
      assert.ok(
        Math.abs(reduced - expected) <= 1e-9 * Math.abs(expected),
        `${what}: loss ${reduced}, PyTorch ${expected}`,
      );
      assertClose(r.dlogits.data, c.reductions[reduction].grad, { rtol: 1e-5, atol: 1e-6, what: `${what} gradient` });
      assert.equal(r.impossible, c.zeroInfinity ? 1 : 0);
    }
  }
});
