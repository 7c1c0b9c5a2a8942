import type { Tensor } from '../tensor/tensor.ts';

/**
 * What a dataset asks of a model: one class per sample (`labels`), real values (`targets`,
 * regression) or several independent yes/no labels (`targets` as multi-hot, multiLabel).
 */
export type Task = 'classification' | 'regression' | 'multiLabel';

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
  /** gradient of (gradScale · Σ losses) w.r.t. the outputs */
  dlogits: Tensor;
}

/**
 * A loss over [N, K] model outputs. Per-sample losses are means over the K outputs where the loss
 * is elementwise (MSE, BCE), so lossSum / N is PyTorch's 'mean' reduction. `gradScale` is usually
 * 1/N; data-parallel and micro-batched runs pass 1/globalBatch. `targets` (N·K values) are required
 * by the regression and multi-label losses, `labels` by the classification one.
 */
export interface Loss {
  readonly task: Task;
  compute(outputs: Tensor, labels: Int32Array, gradScale: number, targets?: Float32Array): LossResult;
}

/** The [N, K] shape of `outputs` and a check that `targets` hold N·K values, naming the loss. */
export function targetRows(what: string, outputs: Tensor, targets: Float32Array | undefined): { n: number; k: number; t: Float32Array } {
  const n = outputs.batch, k = outputs.size / Math.max(n, 1);
  if (!targets) throw new Error(`loss ${what}: the batch has no targets; it needs a regression or multi-label dataset (Dataset.targets)`);
  if (targets.length < n * k) {
    throw new Error(`loss ${what}: the model gives ${k} outputs per sample but the batch's targets hold ${targets.length / Math.max(n, 1)} per sample`);
  }
  return { n, k, t: targets };
}
