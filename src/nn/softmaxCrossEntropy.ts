import { Tensor } from '../tensor/tensor.ts';
import type { Backend } from '../kernels/backend.ts';
import type { DeviceLoss, Loss, LossResult } from './loss.ts';

export type { LossResult } from './loss.ts';

/**
 * Softmax cross-entropy over [N, classes] logits with integer labels (the backend's kernel), with
 * optional label smoothing ε (PyTorch's `label_smoothing`): the target is (1 − ε)·onehot + ε/K,
 * which adds ε·(z_label − mean z) to a sample's loss and ε·(onehot − 1/K) to its gradient — a
 * pass over the logits only when ε > 0.
 */
export class SoftmaxCrossEntropy implements Loss {
  readonly task = 'classification' as const;
  private grad: Float32Array = new Float32Array(0);

  constructor(
    private readonly backend: Backend,
    readonly labelSmoothing = 0,
  ) {
    if (!(labelSmoothing >= 0 && labelSmoothing < 1))
      throw new Error(`loss.labelSmoothing: expected a number ≥ 0 and < 1, got ${labelSmoothing}`);
  }

  /** `gradScale` is usually 1/N (mean loss); data-parallel and micro-batched runs pass 1/globalBatch. */
  compute(logits: Tensor, labels: Int32Array, gradScale: number): LossResult {
    const [n, classes] = logits.shape as [number, number];
    const correct = countCorrect(logits.data, labels, n, classes);
    // grow-only, like layer buffers: alternating micro-batch sizes must not allocate every time
    if (this.grad.length < logits.size) this.grad = this.backend.alloc(logits.size);
    const grad = this.grad.length === logits.size ? this.grad : this.grad.subarray(0, logits.size);
    let lossSum = this.backend.softmaxCrossEntropy(logits.data, labels, n, classes, grad, gradScale);
    if (this.labelSmoothing > 0)
      lossSum += smooth(logits.data, labels, n, classes, grad, gradScale, this.labelSmoothing);
    return { lossSum, correct, dlogits: new Tensor(logits.shape, grad) };
  }

  /** The loss on a device (DeviceStepKernels.softmaxCrossEntropySums); label smoothing stays on the host. */
  onDevice(backend: Backend, sums: Float32Array): DeviceLoss | null {
    const kernels = backend.device?.stepKernels;
    if (!kernels || this.labelSmoothing > 0) return null;
    let buffer: Float32Array = new Float32Array(0);
    return (logits, labels, gradScale) => {
      const [n, classes] = logits.shape as [number, number];
      if (buffer.length < logits.size) buffer = backend.alloc(logits.size);
      const grad = buffer.length === logits.size ? buffer : buffer.subarray(0, logits.size);
      kernels.softmaxCrossEntropySums(logits.data, labels, n, classes, grad, gradScale, sums);
      return new Tensor(logits.shape, grad);
    };
  }
}

/** Label smoothing's share of the loss sum, adding its share of the gradient to `grad`. */
function smooth(
  z: Float32Array,
  labels: Int32Array,
  rows: number,
  classes: number,
  grad: Float32Array,
  gradScale: number,
  eps: number,
): number {
  let extra = 0;
  const spread = (gradScale * eps) / classes;
  for (let r = 0; r < rows; r++) {
    const base = r * classes;
    let sum = 0;
    for (let c = 0; c < classes; c++) {
      sum += z[base + c]!;
      grad[base + c] = grad[base + c]! - spread;
    }
    const at = base + labels[r]!;
    extra += eps * (z[at]! - sum / classes);
    grad[at] = grad[at]! + gradScale * eps;
  }
  return extra;
}

/** Samples whose highest logit is at the label (first maximum wins ties). */
export function countCorrect(logits: Float32Array, labels: Int32Array, rows: number, classes: number): number {
  let correct = 0;
  for (let r = 0; r < rows; r++) {
    const base = r * classes;
    let best = 0,
      bestValue = logits[base]!;
    for (let c = 1; c < classes; c++) {
      const v = logits[base + c]!;
      if (v > bestValue) {
        bestValue = v;
        best = c;
      }
    }
    if (best === labels[r]) correct++;
  }
  return correct;
}
