/**
 * When checkpoints are due, decided from the config and the global step alone, so every device
 * agrees without talking (a model-parallel model's gather is collective: all must take part).
 */
import type { RunConfig } from '../../config/runConfig.ts';

/**
 * A checkpoint set is due after `stepsDone` steps (a step boundary): every `checkpointEvery`
 * epochs or `{ steps: N }` steps, and always after the run's last step.
 */
export function setDue(config: RunConfig, stepsDone: number, stepsPerEpoch: number, totalSteps: number): boolean {
  if (stepsDone <= 0) return false;
  if (stepsDone === totalSteps) return true;
  const every = config.train.checkpointEvery;
  if (typeof every === 'number') return every > 0 && stepsDone % (every * stepsPerEpoch) === 0;
  return stepsDone % every.steps === 0;
}

/** Whether RUN_DIR/model.safetensors is rewritten at the end of epoch `epoch` (0-based): checkpointEvery in epochs, and the last. */
export function modelFileDue(config: RunConfig, epoch: number): boolean {
  const every = config.train.checkpointEvery;
  return epoch === config.train.epochs - 1 || (typeof every === 'number' && every > 0 && (epoch + 1) % every === 0);
}
