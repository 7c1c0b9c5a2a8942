/**
 * Watching an evaluation metric over a run: which one `train.best` and `train.earlyStopping` watch
 * once the data is known (`resolveTracking`), and the running record of its best value
 * (`MetricTracker`), kept in checkpoint sets so a resumed run goes on from the same record.
 */
import type { Dataset } from '../../data/dataset.ts';
import type { EvalMetric, MetricGoal, RunConfig } from '../../config/runConfig.ts';

/** What the watched metrics are measured on: a validation split, or the test set. */
export interface TrackedData {
  train: Dataset;
  validation?: Dataset;
}

const naturalMode = (metric: EvalMetric): 'min' | 'max' => (metric.endsWith('Loss') ? 'min' : 'max');

/** Data whose accuracy means something: classification (the default task). */
function classifies(ds: Dataset): boolean {
  const task = (ds as { task?: string }).task;
  return task === undefined || task === 'classification';
}

/**
 * The config with `train.best` and `train.earlyStopping` made concrete for this data (what
 * config.yaml records), or an error naming the field when the metric cannot be measured: val… without
 * a validation split, test… per epoch when a validation split takes the per-epoch evaluation.
 */
export function resolveTracking(config: RunConfig, data: TrackedData): RunConfig {
  const validation = data.validation !== undefined;
  const { best, earlyStopping } = config.train;
  const resolvedBest =
    best === 'auto' ? (validation ? goal(classifies(data.validation!) ? 'valAccuracy' : 'valLoss') : false) : best;
  if (resolvedBest) checkMeasurable('train.best', resolvedBest.metric, validation);
  let resolvedStop = earlyStopping;
  if (earlyStopping) {
    const metric = earlyStopping.metric === 'auto' ? (validation ? 'valLoss' : 'testLoss') : earlyStopping.metric;
    checkMeasurable('train.earlyStopping', metric, validation);
    resolvedStop = {
      ...earlyStopping,
      metric,
      mode: earlyStopping.mode === 'auto' ? naturalMode(metric) : earlyStopping.mode,
    };
  }
  return { ...config, train: { ...config.train, best: resolvedBest, earlyStopping: resolvedStop } };
}

const goal = (metric: EvalMetric): MetricGoal => ({ metric, mode: naturalMode(metric) });

function checkMeasurable(field: string, metric: EvalMetric, validation: boolean): void {
  if (metric.startsWith('val') && !validation) {
    throw new Error(
      `${field}: ${metric} is measured on a validation split, and this run has none; ` +
        `hold one out of the training data (data.validation: 0.1) or watch test${metric.slice(3)}`,
    );
  }
  if (metric.startsWith('test') && validation) {
    throw new Error(
      `${field}: with a validation split the test set is evaluated once, at the end, so ${metric} cannot be watched per epoch; ` +
        `watch val${metric.slice(4)}`,
    );
  }
}

/**
 * The watched metrics of a resolved config (null: not watched). A config train() has not resolved
 * (devices run directly, as tests do) watches no best: `auto` needs the data to choose.
 */
export function trackedGoals(config: RunConfig): {
  best: MetricGoal | null;
  earlyStopping: (MetricGoal & { patience: number; minDelta: number }) | null;
} {
  const { best, earlyStopping } = config.train;
  if (earlyStopping && (earlyStopping.metric === 'auto' || earlyStopping.mode === 'auto')) {
    throw new Error('trackedGoals: train.earlyStopping is not resolved (resolveTracking) yet');
  }
  return {
    best: best === 'auto' ? null : best || null,
    earlyStopping: earlyStopping ? (earlyStopping as MetricGoal & { patience: number; minDelta: number }) : null,
  };
}

/** A tracker's record (plain data: it goes into a checkpoint set's state.json). */
export interface TrackerState {
  metric: EvalMetric;
  mode: 'min' | 'max';
  /** the best value so far (null: no evaluation yet), and the epoch (0-based) and global step of it */
  best: number | null;
  bestEpoch: number;
  bestStep: number;
  /** evaluations since the best one that did not improve on it by more than minDelta */
  wait: number;
  /** global step of the last evaluation recorded (-1: none) */
  lastStep: number;
}

/** The running best of one metric. */
export class MetricTracker {
  private s: TrackerState;
  readonly minDelta: number;

  constructor(goal: MetricGoal, minDelta = 0, saved?: TrackerState | null) {
    this.minDelta = minDelta;
    this.s =
      saved && saved.metric === goal.metric && saved.mode === goal.mode
        ? { ...saved }
        : { metric: goal.metric, mode: goal.mode, best: null, bestEpoch: -1, bestStep: -1, wait: 0, lastStep: -1 };
  }

  /**
   * Records the evaluation after epoch `epoch` at global step `step`: 'improved' when it beats the best
   * by more than minDelta (the first one always does; NaN never), 'worse' otherwise, 'repeat' when
   * an evaluation at this step was already recorded (a resumed run evaluating again what its
   * checkpoint set was taken before).
   */
  update(value: number, epoch: number, step: number): 'improved' | 'worse' | 'repeat' {
    if (step <= this.s.lastStep) return 'repeat';
    this.s.lastStep = step;
    const { best, mode } = this.s;
    const better =
      Number.isFinite(value) &&
      (best === null || (mode === 'max' ? value > best + this.minDelta : value < best - this.minDelta));
    if (!better) {
      this.s.wait++;
      return 'worse';
    }
    Object.assign(this.s, { best: value, bestEpoch: epoch, bestStep: step, wait: 0 });
    return 'improved';
  }

  /** Takes a better best found elsewhere (the metadata of a model-best file written after the resumed set). */
  adopt(value: number, epoch: number, step: number): void {
    const { best, mode } = this.s;
    if (Number.isFinite(value) && (best === null || (mode === 'max' ? value > best : value < best))) {
      Object.assign(this.s, { best: value, bestEpoch: epoch, bestStep: step });
    }
  }

  get state(): TrackerState {
    return { ...this.s };
  }
}
