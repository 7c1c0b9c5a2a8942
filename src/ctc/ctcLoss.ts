import { Tensor } from '../tensor/tensor.ts';
import type { Backend } from '../kernels/backend.ts';
import { ctcMinFrames, ctcSample, CtcWorkspace, logSoftmaxRows, type CtcOffsets } from './ctcForwardBackward.ts';

export { ctcMinFrames } from './ctcForwardBackward.ts';

/**
 * How per-sample CTC losses ℓ_i (−log p(labels_i | x_i)) make the batch's loss:
 * - `sum`: Σ ℓ_i;
 * - `mean`: (1/N) Σ ℓ_i / max(S_i, 1), S_i the sample's label count — PyTorch's `reduction='mean'`;
 * - `batchMean`: (1/N) Σ ℓ_i — DeepSpeech's `tf.reduce_mean(ctc_loss)`.
 */
export type CtcReduction = 'sum' | 'mean' | 'batchMean';

/** The CTC loss's options: the blank class, the reduction, and whether impossible samples count as 0. */
export interface CtcLossOptions {
  /** class index of the blank; default 0 */
  blank?: number;
  /** default `mean` (PyTorch's default) */
  reduction?: CtcReduction;
  /**
   * A sample without any alignment (too few frames for its labels) contributes loss 0 and
   * gradient 0 instead of being an error (PyTorch's `zero_infinity`). Default false.
   */
  zeroInfinity?: boolean;
}

/**
 * The targets of a batch of N samples. Labels are PADDED: `labels` is [N, S] row-major,
 * S = labels.length / N, and sample i's labels are labels[i·S, i·S + labelLengths[i]); values past
 * a row's length are ignored (any padding value). Labels are class indices in [0, C), never the blank.
 */
export interface CtcTargets {
  labels: Int32Array;
  /** [N] labels per sample, 0 … S */
  labelLengths: Int32Array;
  /** [N] valid frames per sample, 0 … T; frames past it are padding (zero gradient, never read) */
  inputLengths: Int32Array;
  /** names sample i (within this batch) in errors, e.g. the dataset's file and line */
  describe?: (sample: number) => string;
}

/** What one CTC loss evaluation gives: the weighted loss sum, per-sample losses, impossible samples, the logits' gradient. */
export interface CtcLossResult {
  /**
   * Σ_i w_i·ℓ_i over this batch, w_i = 1/max(S_i, 1) for `mean` and 1 otherwise: summed over
   * micro-batches and devices and divided by the global batch (`mean`, `batchMean`) it is the
   * reduced loss (see ctcReducedLoss)
   */
  lossSum: number;
  /** ℓ_i per sample (0 for a sample zeroed by zeroInfinity); a view, valid until the next compute */
  losses: Float64Array;
  /** samples without any alignment that zeroInfinity counted as 0 */
  impossible: number;
  /** gradient of gradScale · lossSum w.r.t. the logits [N, T, C]; zero past each input length */
  dlogits: Tensor;
}

/**
 * The gradScale to pass to `CtcLoss.compute` for a reduction. `meanScale` is what the training
 * loop passes any loss (1/N on one device; devices/globalBatch data-parallel, whose gradients are
 * then averaged over the devices). `mean` and `batchMean` are batch means already; `sum` undoes
 * the 1/globalBatch, so its gradient is globalBatch times larger (learning rates differ).
 */
export function ctcGradScale(reduction: CtcReduction, meanScale: number, globalBatch: number): number {
  return reduction === 'sum' ? meanScale * globalBatch : meanScale;
}

/** The reduced loss of a whole batch from its (summed) `lossSum` and sample count. */
export function ctcReducedLoss(reduction: CtcReduction, lossSum: number, batch: number): number {
  return reduction === 'sum' ? lossSum : batch > 0 ? lossSum / batch : 0;
}

/**
 * CTC loss over per-frame logits [N, T, C] (log-softmax inside; numerically stable log-space
 * forward–backward in float64). Like SoftmaxCrossEntropy, `compute` returns the batch's loss sum
 * and the gradient of gradScale · lossSum. Buffers grow only, so alternating batch shapes do not
 * allocate after the largest has been seen.
 */
export class CtcLoss {
  readonly blank: number;
  readonly reduction: CtcReduction;
  readonly zeroInfinity: boolean;
  private grad: Float32Array = new Float32Array(0);
  private losses = new Float64Array(0);
  private logProbs = new Float64Array(0);
  private readonly ws = new CtcWorkspace();
  private readonly offsets: Required<CtcOffsets> = { labels: 0, labelCount: 0, grad: 0 };

  constructor(
    private readonly backend: Backend,
    options: CtcLossOptions = {},
  ) {
    this.blank = options.blank ?? 0;
    this.reduction = options.reduction ?? 'mean';
    this.zeroInfinity = options.zeroInfinity ?? false;
    if (!Number.isInteger(this.blank) || this.blank < 0) {
      throw new Error(`CTC loss: blank must be a class index ≥ 0, got ${this.blank}`);
    }
    if (!['sum', 'mean', 'batchMean'].includes(this.reduction)) {
      throw new Error(`CTC loss: reduction must be sum, mean or batchMean, got ${String(this.reduction)}`);
    }
  }

  /**
   * Loss and gradient of a batch. Every check runs before any work: a bad shape or label, or a
   * sample too short for its labels (unless zeroInfinity), is an error naming the sample.
   * `gradScale` 0 (evaluation) skips the backward pass: dlogits is then all zeros.
   */
  compute(logits: Tensor, targets: CtcTargets, gradScale: number): CtcLossResult {
    const { n, frames, classes, width } = this.check(logits, targets);
    const { labels, labelLengths, inputLengths } = targets;
    const size = logits.size;
    if (this.grad.length < size) this.grad = this.backend.alloc(size);
    const grad = this.grad.length === size ? this.grad : this.grad.subarray(0, size);
    if (this.losses.length < n) this.losses = new Float64Array(n);
    const losses = this.losses.subarray(0, n);
    if (this.logProbs.length < frames * classes) this.logProbs = new Float64Array(frames * classes);

    let lossSum = 0,
      impossible = 0;
    const at = this.offsets,
      backward = gradScale !== 0;
    for (let i = 0; i < n; i++) {
      const base = i * frames * classes,
        valid = inputLengths[i]!;
      at.labels = i * width;
      at.labelCount = labelLengths[i]!;
      at.grad = base;
      const weight = this.reduction === 'mean' ? 1 / Math.max(labelLengths[i]!, 1) : 1;
      logSoftmaxRows(logits.data, base, valid, classes, this.logProbs);
      const loss = ctcSample(
        this.logProbs,
        valid,
        classes,
        labels,
        this.blank,
        this.ws,
        backward ? grad : null,
        gradScale * weight,
        at,
      );
      // padding frames never get gradient; nor does a sample without alignments
      grad.fill(0, base + (loss === Infinity || !backward ? 0 : valid * classes), base + frames * classes);
      if (loss === Infinity && this.zeroInfinity) {
        impossible++;
        losses[i] = 0;
        continue;
      }
      losses[i] = loss;
      lossSum += weight * loss;
    }
    return { lossSum, losses, impossible, dlogits: new Tensor(logits.shape, grad) };
  }

  private check(logits: Tensor, t: CtcTargets): { n: number; frames: number; classes: number; width: number } {
    if (logits.shape.length !== 3) {
      throw new Error(
        `CTC loss: logits must be [N, T, C] (batch, frames, classes), got shape [${logits.shape.join(', ')}]`,
      );
    }
    const [n, frames, classes] = logits.shape as [number, number, number];
    if (this.blank >= classes) {
      throw new Error(
        `CTC loss: blank ${this.blank} is not a class of the ${classes} logits per frame; set blank to 0 … ${classes - 1}`,
      );
    }
    if (t.inputLengths.length !== n || t.labelLengths.length !== n) {
      throw new Error(
        `CTC loss: ${n} samples need ${n} input lengths and label lengths, got ${t.inputLengths.length} and ${t.labelLengths.length}`,
      );
    }
    if (n === 0) return { n, frames, classes, width: 0 };
    if (t.labels.length % n !== 0) {
      throw new Error(
        `CTC loss: labels must be padded to [N, S]: ${t.labels.length} values are not a multiple of the ${n} samples`,
      );
    }
    const width = t.labels.length / n;
    const name = (i: number): string => `sample ${i} of the batch${t.describe ? ` (${t.describe(i)})` : ''}`;
    for (let i = 0; i < n; i++) {
      const valid = t.inputLengths[i]!,
        len = t.labelLengths[i]!;
      if (!(valid >= 0 && valid <= frames)) {
        throw new Error(`CTC loss: ${name(i)} has input length ${valid}, outside 0 … ${frames} (the batch's frames)`);
      }
      if (!(len >= 0 && len <= width)) {
        throw new Error(`CTC loss: ${name(i)} has label length ${len}, outside 0 … ${width} (the padded label width)`);
      }
      for (let j = 0; j < len; j++) {
        const c = t.labels[i * width + j]!;
        if (c < 0 || c >= classes || c === this.blank) {
          throw new Error(
            `CTC loss: ${name(i)} has label ${c} at position ${j}: labels are classes 0 … ${classes - 1} other than the blank (${this.blank})`,
          );
        }
      }
      const need = ctcMinFrames(t.labels, len, i * width);
      if (need > valid && !this.zeroInfinity) {
        const repeats = need - len;
        throw new Error(
          `CTC loss: ${name(i)} is too short for its transcript: ${valid} frames, but its ${len} labels` +
            `${repeats > 0 ? ` with ${repeats} repeated adjacent label${repeats > 1 ? 's' : ''} (a blank must separate them)` : ''}` +
            ` need at least ${need}; drop or trim the sample, produce more frames per second, or set zeroInfinity to count it as loss 0`,
        );
      }
    }
    return { n, frames, classes, width };
  }
}
