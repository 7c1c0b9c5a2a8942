/**
 * Evaluating a speech model on a set of utterances: batches of similar length (sorted, so they pad
 * little), the forward pass in evaluation mode, the CTC loss without its gradient and the greedy
 * transcripts it counts against the labels — exact transcripts (accuracy), character and word
 * edits. Counts are summed over the whole set before dividing (corpus CER/WER).
 */
import type { Tensor } from '../../tensor/tensor.ts';
import type { Sequential } from '../../nn/model.ts';
import { addErrorCounts, type ErrorCounts, type Loss } from '../../nn/loss.ts';
import type { ForwardContext } from '../../nn/layer.ts';
import { errorRate } from '../../ctc/errorRates.ts';
import { BucketBatchSampler } from '../../data/bucketSampler.ts';
import type { SpeechDataset } from '../../speech/speechDataset.ts';
import { speechBatch } from '../../data/batches.ts';
import type { EvalResult } from './evalResult.ts';

/** Utterances per evaluation batch: a recurrent layer keeps every frame's state, so fewer than images. */
export const SPEECH_EVAL_BATCH = 64;

/** Loss, exact transcripts, CER and WER of `model` on `ds`; `toTensor` copies a batch's inputs into the model's buffer. */
export function evaluateSpeech(
  model: Sequential,
  loss: Loss,
  ds: SpeechDataset,
  toTensor: (images: Float32Array, n: number, frames: number) => Tensor,
  batchSize = SPEECH_EVAL_BATCH,
): EvalResult {
  let lossSum = 0,
    correct = 0,
    errors: ErrorCounts | undefined;
  if (ds.count === 0)
    return { loss: NaN, accuracy: NaN, cer: 0, wer: 0, errors: { charErrors: 0, chars: 0, wordErrors: 0, words: 0 } };
  const order = new BucketBatchSampler({
    lengths: ds.frames,
    batchSize,
    worldSize: 1,
    rank: 0,
    seed: 0,
    shuffle: false,
    dropLast: false,
  });
  for (const { indices } of order.epoch(0)) {
    const b = speechBatch(ds, indices);
    const s = b.sequence!;
    const ctx: ForwardContext = { training: false, seed: 0, step: 0, sampleOffset: 0, lengths: s.lengths };
    const logits = model.forward(toTensor(b.images, b.count, s.frames), ctx);
    const r = loss.compute(logits, b.labels, 0, undefined, {
      inputLengths: model.outputLengths(s.lengths),
      labelLengths: s.labelLengths,
      space: s.space,
      describe: s.describe,
    });
    lossSum += r.lossSum;
    correct += r.correct;
    errors = addErrorCounts(errors, r.errors);
  }
  const e = errors!;
  return {
    loss: lossSum / ds.count,
    accuracy: correct / ds.count,
    errors: e,
    cer: errorRate({ errors: e.charErrors, length: e.chars }),
    wer: errorRate({ errors: e.wordErrors, length: e.words }),
  };
}
