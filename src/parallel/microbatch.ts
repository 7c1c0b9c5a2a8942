import { Tensor } from '../tensor/tensor.ts';
import { ownedSlice } from '../comm/communicator.ts';
import type { TrainableModel } from '../nn/trainableModel.ts';
import type { Loss } from '../nn/loss.ts';
import type { ForwardContext } from '../nn/layer.ts';

/**
 * The k micro-batches of a batch of n samples: contiguous, as even as possible (the first get the
 * extra sample). With `keepEmpty` there are always k, some possibly empty (replicas that synchronise
 * BatchNorm statistics must all run the same number of passes); otherwise empty ones are left out.
 */
export function microBatchRanges(n: number, k: number, keepEmpty = false): { start: number; end: number }[] {
  if (!Number.isInteger(k) || k < 1) throw new Error(`train.microBatches: expected a positive integer, got ${k}`);
  const ranges = Array.from({ length: k }, (_, i) => ownedSlice(n, k, i));
  return keepEmpty ? ranges : ranges.filter((r) => r.end > r.start);
}

export interface MicroBatchResult {
  lossSum: number;
  correct: number;
  samples: number;
  /** the loss's extra metric sums (regression: Σ MAE per sample; multi-label: exact matches), when it has them */
  absErrorSum?: number;
  exactMatches?: number;
}

/**
 * Micro-batching: forward and backward on each of k slices of the batch in sequence, parameter
 * gradients accumulating (the kernels add into them). Every slice scales its loss gradient by the
 * same `gradScale` as the whole batch would, so the sum over slices is the whole batch's gradient:
 * the step equals the unsplit one (up to summation order), while only one slice's activations are
 * held at a time. Dropout masks see the slice's global and local sample offsets, so they are the
 * ones the whole batch would draw. BatchNorm normalises each micro-batch with its own statistics
 * (as in GPipe and PyTorch), so a model with BatchNorm is NOT equal to the unsplit step, and its
 * running statistics move once per micro-batch.
 *
 * `onReady` (gradient buckets ready for reduction) is passed only to the last slice's backward:
 * before that, the gradients are not final. `targets` (regression, multi-label: n × K values)
 * are sliced like the labels.
 */
export async function accumulateMicroBatches(model: TrainableModel, loss: Loss, x: Tensor, labels: Int32Array,
                                             ctx: ForwardContext, gradScale: number, k: number,
                                             onReady?: (offset: number) => void, targets?: Float32Array): Promise<MicroBatchResult> {
  const n = labels.length, per = x.size / Math.max(x.batch, 1), perTarget = targets ? targets.length / Math.max(n, 1) : 0;
  const ranges = microBatchRanges(n, k, model.needsAsync);
  const total: MicroBatchResult = { lossSum: 0, correct: 0, samples: n };
  for (const [i, { start, end }] of ranges.entries()) {
    const xs = new Tensor([end - start, ...model.inputShape], x.data.subarray(start * per, end * per));
    const sub: ForwardContext = { ...ctx, sampleOffset: ctx.sampleOffset + start, localOffset: (ctx.localOffset ?? 0) + start };
    const logits = await model.forwardAsync(xs, sub);
    // an empty slice (a device without samples in a step that communicates) has no loss
    if (end > start) {
      const r = loss.compute(logits, labels.subarray(start, end), gradScale, targets && (ranges.length === 1 ? targets : targets.subarray(start * perTarget, end * perTarget)));
      total.lossSum += r.lossSum; total.correct += r.correct;
      if (r.absErrorSum !== undefined) total.absErrorSum = (total.absErrorSum ?? 0) + r.absErrorSum;
      if (r.exactMatches !== undefined) total.exactMatches = (total.exactMatches ?? 0) + r.exactMatches;
      await model.backwardAsync(r.dlogits, i === ranges.length - 1 ? onReady : undefined);
    } else {
      await model.backwardAsync(logits, i === ranges.length - 1 ? onReady : undefined);
    }
  }
  return total;
}
