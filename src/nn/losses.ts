import type { Backend } from '../kernels/backend.ts';
import type { LossSpec } from './spec.ts';
import type { Loss, Task } from './loss.ts';
import { SoftmaxCrossEntropy } from './softmaxCrossEntropy.ts';
import { MeanSquaredError } from './meanSquaredError.ts';
import { BinaryCrossEntropy } from './binaryCrossEntropy.ts';
import { CtcSequenceLoss } from './ctcSequenceLoss.ts';
import { TokenCrossEntropy } from './tokenCrossEntropy.ts';

/** The loss of the config's `loss:` field. */
export function createLoss(backend: Backend, spec: LossSpec): Loss {
  switch (spec.type) {
    case 'softmaxCrossEntropy':
      return new SoftmaxCrossEntropy(backend, spec.labelSmoothing);
    case 'meanSquaredError':
      return new MeanSquaredError(backend);
    case 'binaryCrossEntropy':
      return new BinaryCrossEntropy(backend);
    case 'ctc':
      return new CtcSequenceLoss(backend, spec);
    case 'tokenCrossEntropy':
      return new TokenCrossEntropy(backend);
  }
}

/** The dataset task a loss trains for. */
export function lossTask(spec: LossSpec): Task {
  return LOSS_TASKS[spec.type];
}

/** Each loss's task. */
export const LOSS_TASKS = {
  softmaxCrossEntropy: 'classification',
  meanSquaredError: 'regression',
  binaryCrossEntropy: 'multiLabel',
  ctc: 'transcription',
  tokenCrossEntropy: 'language',
} as const satisfies Record<LossSpec['type'], Task>;

/** The loss that trains each task (the fix a mismatch error suggests). */
export const TASK_LOSSES: Record<Task, LossSpec['type']> = {
  classification: 'softmaxCrossEntropy',
  regression: 'meanSquaredError',
  multiLabel: 'binaryCrossEntropy',
  transcription: 'ctc',
  language: 'tokenCrossEntropy',
};
