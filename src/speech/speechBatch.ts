/**
 * Gathering a batch of utterances for the model and the CTC loss: inputs [N, T, F·(2C+1)] padded with
 * zeros to the batch's longest utterance (context windows stacked here, not stored), the frame count
 * of each sample (frames past it are padding, which layers and the loss ignore: the forward context's
 * `lengths`), and the label sequences padded to the longest, [N, S], with their lengths (the targets
 * of the CTC loss, src/ctc/ctcLoss.ts, with the model's output lengths as `inputLengths`).
 */
import { contextSize, stackContext } from './context.ts';
import type { SpeechDataset } from './speechDataset.ts';

export interface SpeechBatch {
  count: number;
  /** T: the longest utterance of the batch */
  maxFrames: number;
  /** values per frame: featureSize · (2·context + 1) */
  inputSize: number;
  /** count × maxFrames × inputSize, zero past each sample's length */
  inputs: Float32Array;
  /** frames per sample */
  lengths: Int32Array;
  /** S: the longest label sequence of the batch */
  maxLabels: number;
  /** count × maxLabels: sample k's labels (model output indices 1 … K) are the first labelLengths[k] of row k, then 0 */
  labels: Int32Array;
  /** labels per sample */
  labelLengths: Int32Array;
  /** dataset index of each sample: the CTC loss's `describe: (k) => ds.sources[batch.indices[k]]` names its file and line */
  indices: Int32Array;
}

/**
 * The batch of utterances `indices` of `ds` (allocates; a batch's shape changes with its lengths),
 * padded to at least `minFrames` (a model-parallel section pads every device to the global batch's longest).
 */
export function gatherSpeechBatch(ds: SpeechDataset, indices: ArrayLike<number>, minFrames = 0): SpeechBatch {
  const n = indices.length;
  const lengths = new Int32Array(n);
  const labelLengths = new Int32Array(n);
  let maxFrames = minFrames,
    maxLabels = 0;
  for (let k = 0; k < n; k++) {
    const i = indices[k]!;
    if (!(Number.isInteger(i) && i >= 0 && i < ds.count))
      throw new Error(`gatherSpeechBatch(${ds.name}): utterance ${i} is outside 0 … ${ds.count - 1}`);
    lengths[k] = ds.frames[i]!;
    labelLengths[k] = ds.labelOffsets[i + 1]! - ds.labelOffsets[i]!;
    maxFrames = Math.max(maxFrames, lengths[k]!);
    maxLabels = Math.max(maxLabels, labelLengths[k]!);
  }
  const F = ds.featureSize;
  const inputSize = contextSize(F, ds.context);
  const inputs = new Float32Array(n * maxFrames * inputSize);
  const labels = new Int32Array(n * maxLabels);
  for (let k = 0; k < n; k++) {
    const i = indices[k]!;
    const f0 = ds.frameOffsets[i]!;
    const src = ds.features.subarray(f0 * F, (f0 + lengths[k]!) * F);
    stackContext(src, lengths[k]!, F, ds.context, inputs, k * maxFrames * inputSize);
    labels.set(ds.labels.subarray(ds.labelOffsets[i]!, ds.labelOffsets[i + 1]!), k * maxLabels);
  }
  return {
    count: n,
    maxFrames,
    inputSize,
    inputs,
    lengths,
    maxLabels,
    labels,
    labelLengths,
    indices: Int32Array.from(indices),
  };
}
