import type { ModelSpec, LossSpec } from '../nn/spec.ts';
import type { OptimizerSpec, ScheduleSpec } from '../optim/spec.ts';
import type { DataSpec } from '../data/spec.ts';
import type { StrategySpec } from '../parallel/strategies/index.ts';

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
  /** evaluate on the test set every N epochs (0: only at the end) */
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
  /** a collective or parameter-server wait longer than this logs who has not arrived (stall inspector) */
  stallWarningSeconds: number;
  /**
   * clip the applied gradient to this global L2 norm (absent: no clipping): in hybrid after the
   * all-reduce, in bsp/easgd/bmuf each device's local gradient, with a parameter server the pushed one
   */
  clipGradNorm?: number;
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
