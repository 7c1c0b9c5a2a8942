import { Tensor } from '../tensor/tensor.ts';
import type { Backend } from '../kernels/backend.ts';
import { buildModel, type Sequential } from '../nn/model.ts';
import { SoftmaxCrossEntropy } from '../nn/softmaxCrossEntropy.ts';
import type { ForwardContext } from '../nn/layer.ts';
import { createOptimizer, type Optimizer } from '../optim/optimizer.ts';
import type { Dataset } from '../data/dataset.ts';
import type { RunConfig } from '../config/runConfig.ts';
import type { ReplicaView } from '../parallel/strategy.ts';
import { accumulateMicroBatches } from '../parallel/microbatch.ts';

export interface StepResult {
  lossSum: number;
  correct: number;
  samples: number;
}

/** One device's copy of the model with its optimizer and loss: what every strategy acts on. */
export class Replica {
  readonly model: Sequential;
  readonly optimizer: Optimizer;
  private readonly loss: SoftmaxCrossEntropy;
  private input: Float32Array = new Float32Array(0);

  constructor(readonly backend: Backend, readonly config: RunConfig, options: { shared?: boolean } = {}) {
    this.model = buildModel(backend, config.model, options);
    this.model.initialize(config.train.seed);
    this.optimizer = createOptimizer(backend, config.optimizer, this.model.params.length);
    this.loss = new SoftmaxCrossEntropy(backend);
    if (this.model.outputShape.length !== 1) {
      throw new Error(`model: the last layer must produce one score per class, but its output shape is [${this.model.outputShape.join(', ')}]; end with flatten and dense`);
    }
  }

  /** The model's flat buffers and a local optimizer step, as strategies see them. */
  view(): ReplicaView {
    const { params, grads, state } = this.model;
    return { params, grads, state, localStep: (lr) => this.optimizer.step(params, grads, lr) };
  }

  zeroGrads(): void {
    this.model.zeroGrads();
  }

  /** Layers that communicate (synchronised BatchNorm) need every device in every step. */
  get stepsWithoutSamples(): boolean {
    return this.model.needsAsync;
  }

  takePeakActivationBytes(): number {
    return this.model.takePeakActivationBytes();
  }

  /** Scores the model produces per sample (must equal the dataset's classes). */
  get classes(): number {
    return this.model.outputShape[0]!;
  }

  /** Copies a batch into a backend-owned buffer (so the wasm backend computes without copies). */
  private batchTensor(images: Float32Array, n: number): Tensor {
    // grow-only: a short last batch or the evaluation batch must not allocate again and again
    if (this.input.length < images.length) this.input = this.backend.alloc(images.length);
    const input = this.input.length === images.length ? this.input : this.input.subarray(0, images.length);
    input.set(images);
    return new Tensor([n, ...this.model.inputShape], input);
  }

  /**
   * Forward and backward on one batch, ACCUMULATING gradients (zero them first for a fresh step).
   * `gradScale` multiplies dLoss/dlogits: 1/n for a mean over this batch, 1/globalBatch when
   * several devices' or micro-batches' gradients are summed.
   */
  computeGradients(images: Float32Array, labels: Int32Array, ctx: ForwardContext, gradScale: number,
                   onGradientsReady?: (offset: number) => void): StepResult {
    const n = labels.length;
    const logits = this.model.forward(this.batchTensor(images, n), { ...ctx, training: true });
    const { lossSum, correct, dlogits } = this.loss.compute(logits, labels, gradScale);
    this.model.backward(dlogits, onGradientsReady);
    return { lossSum, correct, samples: n };
  }

  /**
   * What the training loop runs: computeGradients in `config.train.microBatches` sequential slices
   * (gradients accumulate; see accumulateMicroBatches), through the model's async passes so layers
   * that communicate (synchronised BatchNorm) can. An empty batch still runs when layers communicate,
   * so every device takes part in their collectives.
   */
  async computeGradientsAsync(images: Float32Array, labels: Int32Array, ctx: ForwardContext, gradScale: number,
                              onGradientsReady?: (offset: number) => void, _globalBatchSize?: number): Promise<StepResult> {
    const x = this.batchTensor(images, labels.length);
    return accumulateMicroBatches(this.model, this.loss, x, labels, { ...ctx, training: true }, gradScale,
      this.config.train.microBatches, onGradientsReady);
  }

  /** Mean loss and accuracy over a dataset, in evaluation mode (no dropout, running BatchNorm stats). */
  evaluate(ds: Dataset, batchSize = 500): { loss: number; accuracy: number } {
    const per = ds.images.length / ds.count;
    let lossSum = 0, correct = 0;
    const ctx: ForwardContext = { training: false, seed: 0, step: 0, sampleOffset: 0 };
    for (let start = 0; start < ds.count; start += batchSize) {
      const n = Math.min(batchSize, ds.count - start);
      const x = this.batchTensor(ds.images.subarray(start * per, (start + n) * per), n);
      const logits = this.model.forward(x, ctx);
      const r = this.loss.compute(logits, ds.labels.subarray(start, start + n), 0);
      lossSum += r.lossSum; correct += r.correct;
    }
    return { loss: lossSum / ds.count, accuracy: correct / ds.count };
  }
}
