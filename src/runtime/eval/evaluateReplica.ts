/**
 * A whole replica's mean loss and the task's metrics over a dataset, in evaluation mode (no dropout,
 * running BatchNorm statistics): accuracy (classification), MAE (regression), per-label accuracy and
 * exact match (multi-label), the mean loss per token and tokens right (language: the loss's per-sample
 * values are means over positions); utterances in length-sorted batches, greedy transcripts against
 * their labels (CER, WER: speechEvaluation.ts).
 */
import type { ForwardContext } from '../../nn/layer.ts';
import type { Sequential } from '../../nn/model.ts';
import { labelsPerSample, type Dataset } from '../../data/dataset.ts';
import type { Replica } from '../device/replica.ts';
import { evaluateSpeech } from './speechEvaluation.ts';
import type { EvalResult } from './evalResult.ts';

/** Evaluates `replica` on `ds` in batches of `batchSize` samples. */
export async function evaluateReplica(replica: Replica<Sequential>, ds: Dataset, batchSize = 500): Promise<EvalResult> {
  // utterances: length-sorted batches, greedy transcripts against the labels (CER, WER)
  if (ds.speech)
    return evaluateSpeech(replica.model, replica.loss, ds.speech, (images, n, frames) =>
      replica.batchTensor(images, n, frames),
    );
  const per = ds.images.length / ds.count,
    perTarget = ds.targets ? (ds.targetSize ?? 0) : 0,
    perLabel = labelsPerSample(ds);
  let lossSum = 0,
    correct = 0,
    absErrorSum = 0,
    exactMatches = 0;
  const ctx: ForwardContext = { training: false, seed: 0, step: 0, sampleOffset: 0 };
  replica.weightsToDevice();
  for (let start = 0; start < ds.count; start += batchSize) {
    const n = Math.min(batchSize, ds.count - start);
    const x = replica.batchTensor(ds.images.subarray(start * per, (start + n) * per), n);
    const logits = replica.model.forward(x, ctx);
    await replica.model.device?.toHost([logits.data]);
    const targets = ds.targets?.subarray(start * perTarget, (start + n) * perTarget);
    const labels = ds.labels.subarray(start * perLabel, (start + n) * perLabel);
    const r = replica.loss.compute(logits, labels, 0, targets);
    lossSum += r.lossSum;
    correct += r.correct;
    absErrorSum += r.absErrorSum ?? 0;
    exactMatches += r.exactMatches ?? 0;
  }
  const count = ds.count;
  const result: EvalResult = { loss: lossSum / count, accuracy: correct / count };
  if (replica.loss.task === 'regression') result.mae = absErrorSum / count;
  if (replica.loss.task === 'multiLabel') result.exactMatch = exactMatches / count;
  return result;
}
