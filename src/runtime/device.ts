import type { Backend } from '../kernels/backend.ts';
import type { Dataset } from '../data/dataset.ts';
import type { Strategy } from '../parallel/strategy.ts';
import type { Communicator } from '../comm/communicator.ts';
import { Replica, isModelParallel, evalExtras } from './replica.ts';
import { runTrainLoop, viewOf, type CommStats } from './trainLoop.ts';
import { saveModelCheckpoint } from './modelCheckpoint.ts';
import { dataMetadata } from '../data/metadata.ts';
import { modelFileDue } from './checkpointPolicy.ts';
import { deviceCheckpointHooks, withParams, type CheckpointSetup } from './deviceCheckpoints.ts';
import type { RunConfig } from '../config/runConfig.ts';
import type { EventSink } from './events.ts';
import type { FaultPlan } from './faultPlan.ts';

export interface DeviceOptions {
  config: RunConfig;
  rank: number;
  worldSize: number;
  backend: Backend;
  strategy: Strategy;
  train: Dataset;
  /** rank 0 evaluates on it after epochs (and writes checkpoints) */
  test: Dataset | null;
  /** rank 0 evaluates on it too, when the data has it besides a test set (a speech dataset's dev.csv): val… fields */
  validation?: Dataset | null;
  checkpointPath: string | null;
  emit: EventSink;
  takeCommStats?: () => CommStats;
  faults?: FaultPlan;
  /** put the replica's flat buffers in shared memory (several devices) */
  shared: boolean;
  /** the devices' communicator: model-parallel layers ("one weird trick") exchange activations over it, synchronised BatchNorm reduces over it */
  comm?: Communicator;
  /** checkpoint sets and resume (absent: none) */
  checkpoints?: CheckpointSetup;
  /** the stop gate's check before each step (a graceful stop; absent: the run cannot be stopped) */
  mayStart?: (step: number) => boolean | Promise<boolean>;
}


/** Everything one device does in a run: build its replica, train, and (rank 0) evaluate and checkpoint. */
export async function runDevice(o: DeviceOptions): Promise<void> {
  const { config, rank } = o;
  if (o.worldSize > 1 && isModelParallel(config) && !o.comm) throw new Error('runDevice: model-parallel layers need the devices\' communicator');
  const replica = Replica.create(o.backend, config, { shared: o.shared, comm: o.comm });
  const view = viewOf(replica);
  await runTrainLoop({
    replica, strategy: o.strategy, config, train: o.train, rank, worldSize: o.worldSize, emit: o.emit,
    takeCommStats: o.takeCommStats, faults: o.faults, mayStart: o.mayStart,
    ...deviceCheckpointHooks({ setup: o.checkpoints, config, rank, worldSize: o.worldSize, replica, strategy: o.strategy, view, comm: o.comm, emit: o.emit, train: o.train }),
    onEpochEnd: async (epoch, step, stopped) => {
      const last = epoch === config.train.epochs - 1;
      const { evalEvery } = config.train;
      // decided from the config (and the agreed stop) alone, so every device agrees on when to gather a split model;
      // a stopped run writes its checkpoint and evaluates nothing extra
      const evalDue = !stopped && (last || (evalEvery > 0 && (epoch + 1) % evalEvery === 0));
      const checkpointDue = stopped || modelFileDue(config, epoch);
      const doEval = o.test && evalDue, doCheckpoint = o.checkpointPath && checkpointDue;
      // a split model's gather is collective: every device takes part
      if (!evalDue && !checkpointDue) return;
      const full = await replica.gather(rank, checkpointDue);
      if (!full || (!doEval && !doCheckpoint)) return;
      // a gathered model holds the job's weights; a whole one may stand for the strategy's (server, centre, block model)
      const params = full !== replica ? full.model.params : o.strategy.modelParams ? await o.strategy.modelParams(view) : view.params;
      withParams(full, params, () => {
        if (doEval) {
          const r = full.evaluate(o.test!), v = o.validation ? full.evaluate(o.validation) : null;
          o.emit({ type: 'eval', epoch, step, testLoss: r.loss, testAccuracy: r.accuracy, ...evalExtras(r),
            ...(v ? { valLoss: v.loss, valAccuracy: v.accuracy, ...evalExtras(v, 'val') } : {}) });
        }
        if (doCheckpoint) {
          saveModelCheckpoint(o.checkpointPath!, full.model, full.optimizer,
            { config: JSON.stringify(config), epoch: String(epoch + 1), step: String(step), strategy: o.strategy.name, ...dataMetadata({ train: o.train }) });
          o.emit({ type: 'checkpoint', epoch, path: o.checkpointPath! });
        }
      });
    },
  });
}
