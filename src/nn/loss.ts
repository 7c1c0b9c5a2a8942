import type { Tensor } from '../tensor/tensor.ts';
import type { Backend } from '../kernels/backend.ts';

/**
 * What a dataset asks of a model: one class per sample (`labels`), real values (`targets`,
 * regression), several independent yes/no labels (`targets` as multi-hot, multiLabel) or a label
 * sequence per variable-length sample (`labels` padded to [N, S] with a SequenceTargets, transcription)
 * or the next token at every position of a window (`labels` [N, T], language).
 */
export type Task = 'classification' | 'regression' | 'multiLabel' | 'transcription' | 'language';

/**
 * What a loss over sequences (CTC) needs besides the outputs [N, T, C] and the labels, which are
 * then padded to [N, S] (sample i's are the first labelLengths[i] of row i).
 */
export interface SequenceTargets {
  /** [N] valid output frames per sample (the model's output lengths): frames past them are padding */
  inputLengths: Int32Array;
  /** [N] labels per sample */
  labelLengths: Int32Array;
  /** samples of the step over all devices (a `sum` reduction scales the gradient back up by it); default N */
  globalBatch?: number;
  /** the label that separates words (the alphabet's space), for word error counts; absent: no word breaks */
  space?: number;
  /** names sample i of the batch in errors: its manifest file and line */
  describe?: (sample: number) => string;
}

/**
 * Edit-distance counts of a batch's decoded outputs against its labels, summed over samples (and,
 * by the caller, over micro-batches and devices) before dividing: CER = charErrors / chars,
 * WER = wordErrors / words.
 */
export interface ErrorCounts {
  charErrors: number;
  chars: number;
  wordErrors: number;
  words: number;
}

/** One batch's loss, its metric counts and the gradient of the outputs. */
export interface LossResult {
  /** sum of per-sample losses (divide by the batch for the mean) */
  lossSum: number;
  /**
   * classification: samples whose arg-max output is the label; multiLabel: the sum over samples of
   * the fraction of labels predicted right (so correct / samples is the per-label accuracy);
   * regression: NaN (accuracy does not apply)
   */
  correct: number;
  /** regression: Σ over samples of the mean absolute error of the sample's outputs */
  absErrorSum?: number;
  /** multiLabel: samples whose every label is predicted right (exact match) */
  exactMatches?: number;
  /** transcription: greedy-decoded outputs against the labels (`correct` counts exact transcripts) */
  errors?: ErrorCounts;
  /** gradient of (gradScale · Σ losses) w.r.t. the outputs */
  dlogits: Tensor;
}

/**
 * A loss over [N, K] model outputs. Per-sample losses are means over the K outputs where the loss
 * is elementwise (MSE, BCE), so lossSum / N is PyTorch's 'mean' reduction. `gradScale` is usually
 * 1/N; data-parallel and micro-batched runs pass 1/globalBatch. `targets` (N·K values) are required
 * by the regression and multi-label losses, `labels` by the classification one, padded labels and
 * `sequence` by the CTC loss (outputs [N, T, C]).
 */
export interface Loss {
  readonly task: Task;
  compute(
    outputs: Tensor,
    labels: Int32Array,
    gradScale: number,
    targets?: Float32Array,
    sequence?: SequenceTargets,
  ): LossResult;
  /**
   * Where the outputs live on a device (`backend.device`): the loss computed there, its sums left
   * there for the step's one read (sums[0] += the loss sum, sums[1] += correct), as a function of
   * a micro-batch's outputs and labels returning dlogits. Absent or null: this loss, or its
   * options, needs the outputs on the host.
   */
  onDevice?(backend: Backend, sums: Float32Array): DeviceLoss | null;
}

/** A loss on a device's outputs: writes dlogits there and adds its sums to the device array it was made with. */
export type DeviceLoss = (outputs: Tensor, labels: Int32Array, gradScale: number) => Tensor;

/** Adds `b`'s counts into `a` (a fresh object when `a` is undefined); `b` undefined leaves `a`. */
export function addErrorCounts(a: ErrorCounts | undefined, b: ErrorCounts | undefined): ErrorCounts | undefined {
  if (!b) return a;
  const out = a ?? { charErrors: 0, chars: 0, wordErrors: 0, words: 0 };
  out.charErrors += b.charErrors;
  out.chars += b.chars;
  out.wordErrors += b.wordErrors;
  out.words += b.words;
  return out;
}

/** The [N, K] shape of `outputs` and a check that `targets` hold N·K values, naming the loss. */
export function targetRows(
  what: string,
  outputs: Tensor,
  targets: Float32Array | undefined,
): { n: number; k: number; t: Float32Array } {
  const n = outputs.batch,
    k = outputs.size / Math.max(n, 1);
  if (!targets)
    throw new Error(
      `loss ${what}: the batch has no targets; it needs a regression or multi-label dataset (Dataset.targets)`,
    );
  if (targets.length < n * k) {
    throw new Error(
      `loss ${what}: the model gives ${k} outputs per sample but the batch's targets hold ${targets.length / Math.max(n, 1)} per sample`,
    );
  }
  return { n, k, t: targets };
}
