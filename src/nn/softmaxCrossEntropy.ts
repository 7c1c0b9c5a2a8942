import { Tensor } from '../tensor/tensor.ts';
import type { Backend } from '../kernels/backend.ts';

export interface LossResult {
  /** sum of per-sample losses (divide by the batch for the mean) */
  lossSum: number;
  /** samples whose arg-max logit is the label */
  correct: number;
  /** gradient of (gradScale · Σ losses) w.r.t. the logits */
  dlogits: Tensor;
}

/** Softmax cross-entropy over [N, classes] logits with integer labels. */
export class SoftmaxCrossEntropy {
  private grad: Float32Array = new Float32Array(0);

  constructor(private readonly backend: Backend) {}

  /** `gradScale` is usually 1/N (mean loss); data-parallel and micro-batched runs pass 1/globalBatch. */
  compute(logits: Tensor, labels: Int32Array, gradScale: number): LossResult {
    const [n, classes] = logits.shape as [number, number];
    const correct = countCorrect(logits.data, labels, n, classes);
    // grow-only, like layer buffers: alternating micro-batch sizes must not allocate every time
    if (this.grad.length < logits.size) this.grad = this.backend.alloc(logits.size);
    const grad = this.grad.length === logits.size ? this.grad : this.grad.subarray(0, logits.size);
    const lossSum = this.backend.softmaxCrossEntropy(logits.data, labels, n, classes, grad, gradScale);
    return { lossSum, correct, dlogits: new Tensor(logits.shape, grad) };
  }
}

/** Samples whose highest logit is at the label (first maximum wins ties). */
export function countCorrect(logits: Float32Array, labels: Int32Array, rows: number, classes: number): number {
  let correct = 0;
  for (let r = 0; r < rows; r++) {
    const base = r * classes;
    let best = 0, bestValue = logits[base]!;
    for (let c = 1; c < classes; c++) {
      const v = logits[base + c]!;
      if (v > bestValue) { bestValue = v; best = c; }
    }
    if (best === labels[r]) correct++;
  }
  return correct;
}
