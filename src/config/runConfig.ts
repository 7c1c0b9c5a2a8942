import type { ModelSpec, LossSpec } from '../nn/spec.ts';
import type { OptimizerSpec, ScheduleSpec } from '../optim/spec.ts';
import type { DataSpec } from '../data/spec.ts';
import type { StrategySpec } from '../parallel/strategies/index.ts';
import type { PipelineScheduleName } from '../parallel/pipeline/schedule.ts';

/** What the evaluation after an epoch measures: the validation split's or the test set's loss and accuracy. */
/** An evaluation's metric: its loss and accuracy, and a speech model's character and word error rates. */
export type EvalMetric =
  | 'valLoss'
  | 'valAccuracy'
  | 'testLoss'
  | 'testAccuracy'
  | 'valCER'
  | 'valWER'
  | 'testCER'
  | 'testWER';

/** A metric and which way is better. */
export interface MetricGoal {
  metric: EvalMetric;
  mode: 'min' | 'max';
}

/**
 * `train.best`: the metric that chooses RUN_DIR/model-best.safetensors. 'auto' (the default) is
 * resolved when the data is known (runtime/events/tracking.ts): valAccuracy (max) with a validation split
 * (valLoss for regression and multi-label data), none without one; false: no best checkpoint.
 */
export type BestSpec = 'auto' | false | MetricGoal;

/**
 * `train.earlyStopping`: stop when `metric` has not improved by more than `minDelta` in `patience`
 * evaluations in a row. metric 'auto': valLoss with a validation split, else testLoss; mode 'auto':
 * min for a loss, max for an accuracy.
 */
export interface EarlyStoppingSpec {
  metric: EvalMetric | 'auto';
  mode: 'min' | 'max' | 'auto';
  patience: number;
  minDelta: number;
}

/**
 * `train.divergence`: a device's smoothed training loss that stays above `factor` × its best
 * smoothed loss so far, or above `bound` when given, for `steps` steps in a row stops the run.
 */
export interface DivergenceSpec {
  factor: number;
  steps: number;
  bound?: number;
}

/**
 * `train.initFrom`: start from a checkpoint's weights (fine-tuning). `reinit`: layers (`layers.N`)
 * that start from the model's fresh initialisation instead, or 'mismatched' (those whose shapes
 * differ; a run records the layers it chose); `freeze`: layers whose weights training does not change.
 */
export interface InitFromSpec {
  path: string;
  reinit: 'mismatched' | string[];
  freeze: string[];
}

/** The normalised `train:` section of a RunConfig. */
export interface TrainSpec {
  epochs: number;
  devices: number;
  strategy: StrategySpec;
  seed: number;
  /** kernel backend: js | wasm | native | onednn | auto */
  backend: string;
  /** scale the learning rate by the number of devices (with the schedule's warmup) */
  lrScaling: 'none' | 'linear';
  /** evaluate every N epochs (0: only at the end): on the validation split when there is one, else on the test set */
  evalEvery: number;
  /**
   * write a checkpoint set every N epochs (a number; 0: only at the end) or every N steps
   * (`{ steps: N }`); `{ epochs: N }` is normalised to N
   */
  checkpointEvery: number | { steps: number };
  /** complete checkpoint sets kept in RUN_DIR/checkpoints (older ones are deleted) */
  keepLast: number;
  /** each device's batch runs in this many sequential slices with gradient accumulation (1: whole) */
  microBatches: number;
  /** BatchNorm statistics all-reduced over the devices (false: per-device statistics) */
  syncBatchNorm: boolean;
  /** a step with a NaN/Inf loss or gradient is skipped on every device; this many in a row stop the run */
  maxBadSteps: number;
  /** stop a run whose finite loss blows up (false: never; runtime/device/divergenceGuard.ts) */
  divergence: DivergenceSpec | false;
  /** a collective or parameter-server wait longer than this logs who has not arrived (stall inspector) */
  stallWarningSeconds: number;
  /**
   * clip the applied gradient to this global L2 norm (absent: no clipping): in hybrid after the
   * all-reduce, in bsp/easgd/bmuf/diloco each device's local gradient, with a parameter server the pushed one
   */
  clipGradNorm?: number;
  /** start from a checkpoint's weights, some layers fresh or frozen (absent: a fresh start) */
  initFrom?: InitFromSpec;
  /** which evaluation metric picks RUN_DIR/model-best.safetensors */
  best: BestSpec;
  /** stop when the evaluation metric stops improving (false: never) */
  earlyStopping: EarlyStoppingSpec | false;
  /** the model's layers in consecutive stages on consecutive devices, the micro-batches streamed through them (absent: none) */
  pipeline?: PipelineSpec;
  /**
   * the `parallel: model` layers split over groups of this many consecutive devices, the groups
   * data-parallel (absent: one group of every device; parallel/modelParallel/tensorGroups.ts)
   */
  tensorParallel?: number;
}

/**
 * `train.pipeline`: `stages` devices each run consecutive layers; train.devices / stages pipelines
 * train data-parallel (hybrid over the same stage). The step's train.microBatches micro-batches
 * run by `schedule`; `boundaries` (each stage's first layer after stage 0) override the balance by
 * parameter count.
 */
export interface PipelineSpec {
  stages: number;
  schedule: PipelineScheduleName;
  boundaries?: number[];
}

/** A validated run configuration: what `paratrain train` and the `train()` API consume. */
export interface RunConfig {
  model: ModelSpec;
  loss: LossSpec;
  optimizer: OptimizerSpec;
  schedule: ScheduleSpec;
  data: DataSpec;
  train: TrainSpec;
}
