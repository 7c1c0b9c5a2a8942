/**
 * Gathering a batch of utterances for the model and the CTC loss: inputs [N, T, F·(2C+1)] padded with
 * zeros to the batch's longest utterance (context windows stacked here, not stored), the frame count
 * of each sample (frames past it are padding, which layers and the loss ignore), and the label
 * sequences concatenated with their lengths (the layout of PyTorch's CTC targets).
 */
import { contextSize, stackContext } from './context.ts';
import { type SpeechDataset } from './speechDataset.ts';

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
  /** every sample's labels (model output indices 1 … K), concatenated */
  labels: Int32Array;
  /** labels per sample */
  labelLengths: Int32Array;
  /** dataset index of each sample (for messages: ds.sources[index]) */
  indices: Int32Array;
}

/** The batch of utterances `indices` of `ds` (allocates; a batch's shape changes with its lengths). */
export function gatherSpeechBatch(ds: SpeechDataset, indices: ArrayLike<number>): SpeechBatch {
  const n = indices.length;
  const lengths = new Int32Array(n);
  const labelLengths = new Int32Array(n);
  let maxFrames = 0, totalLabels = 0;
  for (let k = 0; k < n; k++) {
    const i = indices[k]!;
    if (!(Number.isInteger(i) && i >= 0 && i < ds.count)) throw new Error(`gatherSpeechBatch(${ds.name}): utterance ${i} is outside 0 … ${ds.count - 1}`);
    lengths[k] = ds.frames[i]!;
    labelLengths[k] = ds.labelOffsets[i + 1]! - ds.labelOffsets[i]!;
    maxFrames = Math.max(maxFrames, lengths[k]!);
    totalLabels += labelLengths[k]!;
  }
  const F = ds.featureSize;
  const inputSize = contextSize(F, ds.context);
  const inputs = new Float32Array(n * maxFrames * inputSize);
  const labels = new Int32Array(totalLabels);
  let at = 0;
  for (let k = 0; k < n; k++) {
    const i = indices[k]!;
    const f0 = ds.frameOffsets[i]!;
    const src = ds.features.subarray(f0 * F, (f0 + lengths[k]!) * F);
    stackContext(src, lengths[k]!, F, ds.context, inputs, k * maxFrames * inputSize);
    labels.set(ds.labels.subarray(ds.labelOffsets[i]!, ds.labelOffsets[i + 1]!), at);
    at += labelLengths[k]!;
  }
  return { count: n, maxFrames, inputSize, inputs, lengths, labels, labelLengths, indices: Int32Array.from(indices) };
}
