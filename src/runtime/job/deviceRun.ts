import type { Backend } from '../../kernels/backend.ts';
import type { Dataset } from '../../data/dataset.ts';
import type { Strategy } from '../../parallel/strategy.ts';
import type { Communicator } from '../../comm/communicator.ts';
import { Replica, isModelParallel } from '../device/replica.ts';
import { runTrainLoop, viewOf } from '../device/trainLoop.ts';
import { PipelineNet, pipelinePlace } from '../../parallel/pipeline/net.ts';
import type { CommStats } from '../device/stepPhases.ts';
import { deviceCheckpointHooks } from '../device/deviceCheckpoints.ts';
import { frozenRanges, keepFrozen, paramEntriesOf } from '../device/frozenLayers.ts';
import type { CheckpointSetup } from '../checkpoint/checkpointSetup.ts';
import { DeviceEvaluation } from '../eval/evaluation.ts';
import type { RunConfig } from '../../config/runConfig.ts';
import type { EventSink } from '../events/events.ts';
import type { FaultPlan } from '../faults/faultPlan.ts';

export interface DeviceOptions {
  config: RunConfig;
  rank: number;
  worldSize: number;
  backend: Backend;
  strategy: Strategy;
  train: Dataset;
  /** rank 0 evaluates on it after epochs (null: the test set takes its place) */
  validation?: Dataset | null;
  /** rank 0 evaluates on it at the end (after epochs too when there is no validation split), and writes checkpoints */
  test: Dataset | null;
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
  /** the stop gate's check before each step (a graceful stop, early stopping's holds; absent: the run cannot be stopped) */
  mayStart?: (step: number) => boolean | Promise<boolean>;
}

/** Everything one device does in a run: build its replica, train, and (rank 0) evaluate and checkpoint. */
export async function runDevice(o: DeviceOptions): Promise<void> {
  const { config, rank } = o;
  if (o.worldSize > 1 && isModelParallel(config) && !o.comm)
    throw new Error("runDevice: model-parallel layers need the devices' communicator");
  const replica = Replica.create(o.backend, config, { shared: o.shared, comm: o.comm });
  // frozen layers (train.initFrom.freeze) stay as they started whatever the strategy averages
  const strategy = keepFrozen(o.strategy, frozenRanges(config, paramEntriesOf(replica.model)));
  const view = viewOf(replica);
  const evaluation = new DeviceEvaluation({
    config,
    rank,
    replica,
    strategy,
    view,
    emit: o.emit,
    train: o.train,
    validation: o.validation ?? null,
    test: o.test,
    checkpointPath: o.checkpointPath,
    resumed: o.checkpoints?.resume?.state ?? null,
  });
  // a pipeline's stages see the same samples: the batch is split over the pipelines
  const pipeline = config.train.pipeline;
  if (pipeline && !o.comm) throw new Error("runDevice: a pipeline's stages need the devices' communicator");
  const place = pipeline ? pipelinePlace(rank, o.worldSize, pipeline.stages) : null;
  const dataParallel = place ? { rank: place.pipeline, size: place.pipelines } : null;
  // a stage's sampled steps' ops go to the metrics, for the report's pipeline timeline
  if (replica.model instanceof PipelineNet)
    replica.model.onTimeline = (t) => o.emit({ type: 'pipelineTimeline', rank, ...t });
  const checkpoints = deviceCheckpointHooks({
    setup: o.checkpoints,
    config,
    rank,
    worldSize: o.worldSize,
    replica,
    strategy,
    view,
    comm: o.comm,
    emit: o.emit,
    train: o.train,
    tracking: () => evaluation.tracking(),
  });
  await runTrainLoop({
    replica,
    strategy,
    config,
    train: o.train,
    rank,
    worldSize: o.worldSize,
    ...(dataParallel ? { dataParallel } : {}),
    emit: o.emit,
    takeCommStats: o.takeCommStats,
    faults: o.faults,
    mayStart: o.mayStart,
    ...checkpoints,
    afterStart: async () => {
      await checkpoints.afterStart?.();
      await evaluation.atStart();
    },
    onEpochEnd: (epoch, step, stopped) => evaluation.epochEnd(epoch, step, stopped),
  });
}
