/**
 * A device's part in evaluating the run: after each epoch that evalEvery makes due, device 0
 * evaluates the job's model on the validation split (on the test set when there is none), and the
 * test set once at the end — after the last epoch, or at a stop (early or not). Device 0 also keeps the
 * watched metrics' records (tracking.ts): RUN_DIR/model-best.safetensors is rewritten when
 * `train.best`'s metric improves, and each evaluation gets early stopping's verdict, on which the
 * main thread holds or stops every device (evalSchedule.ts). The other devices take part only in a
 * split model's gather, at points decided from the config alone.
 */
import { dirname, join } from 'node:path';
import type { Dataset } from '../../data/dataset.ts';
import type { Strategy, ReplicaView } from '../../parallel/strategy.ts';
import type { TrainableModel } from '../../nn/trainableModel.ts';
import type { EvalMetric, RunConfig } from '../../config/runConfig.ts';
import type { Replica } from '../device/replica.ts';
import { evalExtras } from './evalResult.ts';
import { evaluateReplica } from './evaluateReplica.ts';
import type { EventSink, TrainEvent } from '../events/events.ts';
import type { SetState } from '../checkpoint/checkpointSet.ts';
import { modelFileDue } from '../checkpoint/checkpointPolicy.ts';
import { evalDue, reevaluatesAtStart } from './evalSchedule.ts';
import { MetricTracker, trackedGoals } from '../events/tracking.ts';
import { saveModelCheckpoint } from '../checkpoint/modelCheckpoint.ts';
import { dataMetadata } from '../../data/metadata.ts';
import { withParams } from '../device/deviceCheckpoints.ts';
import { BEST_FILE, readBestCheckpoint } from '../checkpoint/bestCheckpoint.ts';

type EvalEvent = Extract<TrainEvent, { type: 'eval' }>;

export interface EvaluationOptions {
  config: RunConfig;
  rank: number;
  replica: Replica<TrainableModel>;
  strategy: Strategy;
  view: ReplicaView;
  emit: EventSink;
  /** the training data: its description (task, class names, normalisation) goes into the model files */
  train: Dataset;
  /** device 0: what it evaluates on (null elsewhere) */
  validation: Dataset | null;
  test: Dataset | null;
  /** device 0 of process 0: RUN_DIR/model.safetensors (null elsewhere) */
  checkpointPath: string | null;
  /** the checkpoint set a resumed run starts from */
  resumed: SetState | null;
}

export class DeviceEvaluation {
  private readonly o: EvaluationOptions;
  private readonly best: MetricTracker | null;
  private readonly stopper: MetricTracker | null;
  private readonly patience: number;

  constructor(o: EvaluationOptions) {
    this.o = o;
    const goals = trackedGoals(o.config);
    const saved = o.resumed?.tracking;
    const keeps = o.rank === 0;
    this.best = keeps && goals.best ? new MetricTracker(goals.best, 0, saved?.best) : null;
    this.stopper =
      keeps && goals.earlyStopping
        ? new MetricTracker(goals.earlyStopping, goals.earlyStopping.minDelta, saved?.earlyStopping)
        : null;
    this.patience = goals.earlyStopping?.patience ?? 0;
    // a model-best file written after the resumed set (a crash came before the next set) may be better than the set's record
    const onDisk = this.best && o.resumed && this.bestPath ? readBestCheckpoint(this.bestPath) : null;
    if (onDisk && onDisk.metric === goals.best!.metric && onDisk.mode === goals.best!.mode)
      this.best!.adopt(onDisk.value, onDisk.epoch, onDisk.step);
  }

  private get bestPath(): string | null {
    return this.o.checkpointPath && join(dirname(this.o.checkpointPath), BEST_FILE);
  }

  /** The watched metrics' records, for a checkpoint set's state.json (device 0; undefined when none is watched). */
  tracking(): SetState['tracking'] {
    if (!this.best && !this.stopper) return undefined;
    return {
      ...(this.best ? { best: this.best.state } : {}),
      ...(this.stopper ? { earlyStopping: this.stopper.state } : {}),
    };
  }

  /** After a resumed device's state is back: the evaluation its set was taken before, when a record lacks it (every device). */
  async atStart(): Promise<void> {
    const { resumed, config } = this.o;
    if (!resumed || !reevaluatesAtStart(config, resumed)) return;
    await this.evaluate(resumed.step / resumed.stepsPerEpoch - 1, resumed.step, {
      perEpoch: true,
      finalTest: false,
      gatherOptimizer: false,
    });
  }

  /** The trainLoop's onEpochEnd: evaluations and RUN_DIR/model.safetensors (every device: a split model's gather is collective). */
  async epochEnd(epoch: number, step: number, stopped: boolean): Promise<void> {
    const { config } = this.o;
    const last = epoch === config.train.epochs - 1;
    // decided from the config (and the agreed stop) alone, so every device agrees on when to gather a split model;
    // a stopped run (a signal, an abort, early stopping) writes its checkpoint and evaluates the test set on the
    // weights it stopped with, which are those its final figures report
    const perEpoch = !stopped && evalDue(config, epoch);
    const checkpointDue = stopped || modelFileDue(config, epoch);
    if (!perEpoch && !checkpointDue) return;
    await this.evaluate(epoch, step, {
      perEpoch,
      finalTest: last || stopped,
      gatherOptimizer: checkpointDue,
      checkpoint: checkpointDue,
    });
  }

  private async evaluate(
    epoch: number,
    step: number,
    what: { perEpoch: boolean; finalTest: boolean; gatherOptimizer: boolean; checkpoint?: boolean },
  ): Promise<void> {
    const o = this.o;
    const full = await o.replica.gather(o.rank, what.gatherOptimizer);
    if (!full) return;
    // a gathered model holds the job's weights; a whole one may stand for the strategy's (server, centre, block model)
    const params =
      full !== (o.replica as unknown)
        ? full.model.params
        : o.strategy.modelParams
          ? await o.strategy.modelParams(o.view)
          : o.view.params;
    await withParams(full, params, async () => {
      const event: EvalEvent = { type: 'eval', epoch, step };
      const perEpochSet = o.validation ?? o.test;
      const evaluated = (what.perEpoch && perEpochSet !== null) || (what.finalTest && o.test !== null);
      if (what.perEpoch && perEpochSet) {
        const r = await evaluateReplica(full, perEpochSet);
        if (o.validation) Object.assign(event, { valLoss: r.loss, valAccuracy: r.accuracy, ...evalExtras(r, 'val') });
        else Object.assign(event, { testLoss: r.loss, testAccuracy: r.accuracy, ...evalExtras(r) });
      }
      if (what.finalTest && o.test && event.testLoss === undefined) {
        const r = await evaluateReplica(full, o.test);
        Object.assign(event, { testLoss: r.loss, testAccuracy: r.accuracy, ...evalExtras(r) });
      }
      if (evaluated) o.emit(event);
      if (what.perEpoch) this.record(event, full);
      if (what.checkpoint && o.checkpointPath) {
        saveModelCheckpoint(o.checkpointPath, full.model, full.optimizer, {
          config: JSON.stringify(o.config),
          epoch: String(epoch + 1),
          step: String(step),
          strategy: o.strategy.name,
          ...dataMetadata({ train: o.train }),
        });
        o.emit({ type: 'checkpoint', epoch, path: o.checkpointPath });
      }
    });
  }

  /** Device 0: the watched metrics after a per-epoch evaluation: the best model file, early stopping's verdict. */
  private record(event: EvalEvent, full: Replica): void {
    const o = this.o;
    const value = (metric: EvalMetric) => event[metric] ?? NaN;
    if (
      this.best &&
      this.best.update(value(this.best.state.metric), event.epoch, event.step) === 'improved' &&
      this.bestPath
    ) {
      const { metric, mode, best } = this.best.state;
      saveModelCheckpoint(this.bestPath, full.model, null, {
        config: JSON.stringify(o.config),
        epoch: String(event.epoch + 1),
        step: String(event.step),
        strategy: o.strategy.name,
        ...dataMetadata({ train: o.train }),
        'best.metric': metric,
        'best.mode': mode,
        'best.value': String(best),
      });
      o.emit({ type: 'best', epoch: event.epoch, step: event.step, metric, value: best!, path: this.bestPath });
    }
    if (this.stopper) {
      this.stopper.update(value(this.stopper.state.metric), event.epoch, event.step);
      const s = this.stopper.state;
      const stop = s.wait >= this.patience && event.epoch < o.config.train.epochs - 1;
      o.emit({
        type: 'earlyStopping',
        epoch: event.epoch,
        step: event.step,
        metric: s.metric,
        value: value(s.metric),
        best: s.best ?? NaN,
        bestEpoch: s.bestEpoch,
        wait: s.wait,
        patience: this.patience,
        stop,
      });
    }
  }
}
