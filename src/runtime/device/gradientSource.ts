/** A step's gradients: what computing them asks of a replica, and what it reports. */
import type { SequenceBatch } from '../../data/batcher.ts';
import type { ErrorCounts } from '../../nn/loss.ts';
import type { ForwardContext } from '../../nn/layer.ts';
import type { Poison } from './badSteps.ts';

export interface StepResult {
  lossSum: number;
  /** classification: samples right; multi-label: Σ per-sample fraction of labels right; regression: NaN */
  correct: number;
  samples: number;
  /** transcription: edit counts of the greedy transcripts (summed over devices for CER/WER) */
  errors?: ErrorCounts;
}

/** A replica whose gradients can be zeroed, then computed (accumulated) on a batch. */
export interface GradientSource {
  /** zeroes the gradients; `poison` then writes an injected NaN into them (backward adds to it) */
  zeroGrads(poison?: Poison): void;
  /** forward and backward of this device's samples (in train.microBatches slices), accumulating gradients */
  computeGradientsAsync(
    images: Float32Array,
    labels: Int32Array,
    ctx: ForwardContext,
    gradScale: number,
    onGradientsReady: ((offset: number) => void) | undefined,
    globalBatchSize: number,
    targets?: Float32Array,
    sequence?: SequenceBatch,
  ): Promise<StepResult>;
}
