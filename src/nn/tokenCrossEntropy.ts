import { Tensor } from '../tensor/tensor.ts';
import type { Backend } from '../kernels/backend.ts';
import type { Loss, LossResult } from './loss.ts';
import { countCorrect } from './softmaxCrossEntropy.ts';

/**
 * `loss: tokenCrossEntropy` — softmax cross-entropy at every position of a language model's logits
 * [N, T, vocab], with labels [N·T] (sample i's next tokens at [i·T, (i+1)·T)): PyTorch's
 * F.cross_entropy(logits.view(−1, vocab), labels.view(−1)), nanoGPT's loss.
 *
 * A sample's loss is the mean over its T positions, as the other losses' per-sample values are
 * means over their outputs, so lossSum / N (what the training loop reports, what evaluation
 * divides by) is the mean over all N·T positions: nanoGPT's number. Likewise `correct` is the sum
 * over samples of the fraction of positions whose first maximum is the label, so correct / N is
 * tokens right / tokens. dlogits is the gradient of gradScale·lossSum: softmax − one-hot scaled by
 * gradScale/T, so the loop's gradScale = 1/N (1/globalBatch over devices and micro-batches) makes
 * the step's gradient the mean over every position of the global batch.
 */
export class TokenCrossEntropy implements Loss {
  readonly task = 'language' as const;
  private grad: Float32Array = new Float32Array(0);

  constructor(private readonly backend: Backend) {}

  compute(logits: Tensor, labels: Int32Array, gradScale: number): LossResult {
    if (logits.shape.length !== 3) {
      throw new Error(
        `loss tokenCrossEntropy: needs logits per position [positions, vocab], but the model gives [${logits.shape.slice(1).join(', ')}] per sample; ` +
          'end the model with dense: { units: vocab } or tiedEmbedding: {} on the sequence',
      );
    }
    const [n, t, vocab] = logits.shape as [number, number, number];
    const rows = n * t;
    checkTokenLabels(labels, n, t, vocab);
    const own = labels.length === rows ? labels : labels.subarray(0, rows);
    // grow-only, like layer buffers: alternating micro-batch sizes must not allocate every time
    if (this.grad.length < logits.size) this.grad = this.backend.alloc(logits.size);
    const grad = this.grad.length === logits.size ? this.grad : this.grad.subarray(0, logits.size);
    const sum = this.backend.softmaxCrossEntropy(logits.data, own, rows, vocab, grad, gradScale / t);
    const right = countCorrect(logits.data, own, rows, vocab);
    return { lossSum: sum / t, correct: right / t, dlogits: new Tensor(logits.shape, grad) };
  }
}

/** Every position of the batch has a label, a token id below the model's vocabulary. */
function checkTokenLabels(labels: Int32Array, n: number, t: number, vocab: number): void {
  if (labels.length < n * t) {
    throw new Error(
      `loss tokenCrossEntropy: ${labels.length} labels for ${n} samples of ${t} positions; a language batch holds the next token of every position (${n * t})`,
    );
  }
  for (let r = 0; r < n * t; r++) {
    const label = labels[r]!;
    if (!(label >= 0 && label < vocab)) {
      throw new Error(
        `loss tokenCrossEntropy: sample ${Math.floor(r / t)} of the batch has label ${label} at position ${r % t}, ` +
          `but the model gives ${vocab} scores per position; its last layer needs as many units as the dataset has tokens`,
      );
    }
  }
}
