import { Tensor } from '../tensor/tensor.ts';
import { ownedSlice } from '../comm/communicator.ts';
import type { GradientsReady, TrainableModel } from '../nn/trainableModel.ts';
import { addErrorCounts, type DeviceLoss, type ErrorCounts, type Loss, type SequenceTargets } from '../nn/loss.ts';
import type { ForwardContext } from '../nn/layer.ts';
import type { SequenceBatch } from '../data/batcher.ts';

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
  /** transcription: edit counts of the greedy transcripts */
  errors?: ErrorCounts;
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
 * With `deviceLoss` the loss runs where the logits live and its sums stay there (the result's
 * lossSum and correct are then 0: the caller reads them with the step's other numbers).
 *
 * `onReady` (gradient buckets ready for reduction) is passed only to the last slice's backward:
 * before that, the gradients are not final. `targets` (regression, multi-label: n × K values)
 * are sliced like the labels. A `sequence` batch (x [n, T, F], labels padded [n, S]) slices its
 * lengths and label counts too; every slice keeps the batch's T (padding never changes a result),
 * and the loss gets the model's output lengths of the slice's samples.
 */
export async function accumulateMicroBatches(
  model: TrainableModel,
  loss: Loss,
  x: Tensor,
  labels: Int32Array,
  ctx: ForwardContext,
  gradScale: number,
  k: number,
  onReady?: GradientsReady,
  targets?: Float32Array,
  sequence?: SequenceBatch,
  deviceLoss?: DeviceLoss | null,
): Promise<MicroBatchResult> {
  const n = sequence ? sequence.lengths.length : x.batch,
    per = x.size / Math.max(x.batch, 1);
  const perTarget = targets ? targets.length / Math.max(n, 1) : 0,
    perLabel = labels.length / Math.max(n, 1);
  const ranges = microBatchRanges(n, k, model.needsAsync);
  const total: MicroBatchResult = { lossSum: 0, correct: 0, samples: n };
  for (const [i, { start, end }] of ranges.entries()) {
    const xs = new Tensor([end - start, ...x.shape.slice(1)], x.data.subarray(start * per, end * per));
    const sub: ForwardContext = {
      ...ctx,
      sampleOffset: ctx.sampleOffset + start,
      localOffset: (ctx.localOffset ?? 0) + start,
    };
    if (sequence) sub.lengths = sequence.lengths.subarray(start, end);
    const logits = await model.forwardAsync(xs, sub);
    // an empty slice (a device without samples in a step that communicates) has no loss
    if (end > start && deviceLoss) {
      // the loss where the logits live: its sums stay there for the caller's read
      const dlogits = deviceLoss(logits, labels.subarray(start * perLabel, end * perLabel), gradScale);
      await model.backwardAsync(dlogits, i === ranges.length - 1 ? onReady : undefined);
    } else if (end > start) {
      // on a GPU the loss runs on the host from the logits (one small read per slice)
      await model.device?.toHost([logits.data]);
      const r = loss.compute(
        logits,
        labels.subarray(start * perLabel, end * perLabel),
        gradScale,
        targets && (ranges.length === 1 ? targets : targets.subarray(start * perTarget, end * perTarget)),
        sequence && sequenceTargets(model, sequence, start, end, sub.lengths!, ctx.globalBatch),
      );
      total.lossSum += r.lossSum;
      total.correct += r.correct;
      if (r.absErrorSum !== undefined) total.absErrorSum = (total.absErrorSum ?? 0) + r.absErrorSum;
      if (r.exactMatches !== undefined) total.exactMatches = (total.exactMatches ?? 0) + r.exactMatches;
      total.errors = addErrorCounts(total.errors, r.errors);
      await model.backwardAsync(r.dlogits, i === ranges.length - 1 ? onReady : undefined);
    } else {
      await model.backwardAsync(logits, i === ranges.length - 1 ? onReady : undefined);
    }
  }
  return total;
}

/** The loss's view of samples [start, end) of a sequence batch: the model's output lengths of `lengths`, their label counts. */
function sequenceTargets(
  model: TrainableModel,
  s: SequenceBatch,
  start: number,
  end: number,
  lengths: Int32Array,
  globalBatch?: number,
): SequenceTargets {
  const describe = s.describe;
  return {
    inputLengths: model.outputLengths ? model.outputLengths(lengths) : lengths,
    labelLengths: s.labelLengths.subarray(start, end),
    ...(globalBatch !== undefined ? { globalBatch } : {}),
    ...(s.space !== undefined ? { space: s.space } : {}),
    ...(describe ? { describe: (k: number) => describe(start + k) } : {}),
  };
}
