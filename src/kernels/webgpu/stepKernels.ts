/** DeviceStepKernels on the GPU: the loss's sums and the gradient's guards, read by the host once per step. */
import type { DeviceStepKernels } from '../deviceStepKernels.ts';
import type { GpuContext } from './gpuContext.ts';
import type { Residency } from './residency.ts';
import { softmaxCrossEntropy } from './softmaxCrossEntropy.ts';
import { anyNonFinite, sumOfSquares } from './reductions.ts';

export function stepKernels(ctx: GpuContext, r: Residency): DeviceStepKernels {
  return {
    softmaxCrossEntropySums: (logits, labels, rows, classes, dlogits, gradScale, sums) =>
      softmaxCrossEntropy(
        ctx,
        r.input(logits),
        labels,
        rows,
        classes,
        r.output(dlogits, 'softmaxCrossEntropySums'),
        gradScale,
        r.output(sums, 'softmaxCrossEntropySums'),
      ),
    sumOfSquares: (arrays, out) =>
      sumOfSquares(
        ctx,
        arrays.map((a) => r.input(a)),
        r.output(out, 'sumOfSquares'),
      ),
    anyNonFinite: (arrays, out) =>
      anyNonFinite(
        ctx,
        arrays.map((a) => r.input(a)),
        r.output(out, 'anyNonFinite'),
      ),
  };
}
