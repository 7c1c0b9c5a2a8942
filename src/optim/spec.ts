/** Normalised optimizer and learning-rate schedule descriptions (defaults filled in). */
export type OptimizerSpec =
  | { type: 'sgd'; lr: number; momentum: number; nesterov: boolean; weightDecay: number }
  | { type: 'adam' | 'adamw'; lr: number; beta1: number; beta2: number; eps: number; weightDecay: number };

export type DecaySpec =
  | { type: 'none' }
  | { type: 'step'; every: number; gamma: number }
  | { type: 'cosine'; minLr: number };

export interface ScheduleSpec {
  /** steps of linear warmup from 0 to the base learning rate */
  warmupSteps: number;
  decay: DecaySpec;
}
