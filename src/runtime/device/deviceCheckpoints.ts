/**
 * What a device does for checkpoint sets and resume, as hooks the training loop calls: after each
 * step, when a set is due (checkpointPolicy.ts: every device agrees), every device writes its own
 * file, rank 0 the job's model, and after a barrier rank 0 completes the set (checkpointSet.ts);
 * on resume, after the strategy's onStart, each device takes its saved state back (deviceState.ts).
 */
import { join } from 'node:path';
import type { Communicator } from '../../comm/communicator.ts';
import type { Strategy, ReplicaView } from '../../parallel/strategy.ts';
import type { TrainableModel } from '../../nn/trainableModel.ts';
import type { RunConfig } from '../../config/runConfig.ts';
import type { Replica } from './replica.ts';
import type { EventSink } from '../events/events.ts';
import { setDue } from '../checkpoint/checkpointPolicy.ts';
import { survivesLostDevices } from '../../parallel/strategies/index.ts';
import { globalBatchSize } from './trainLoop.ts';
import { completeSet, partialSetDir, SET_MODEL_FILE, type SetState } from '../checkpoint/checkpointSet.ts';
import { restoreDeviceState, writeDeviceState } from './deviceState.ts';
import { restoreFromWholeModel } from './wholeModelRestore.ts';
import type { CheckpointSetup } from '../checkpoint/checkpointSetup.ts';
import { saveModelCheckpoint } from '../checkpoint/modelCheckpoint.ts';
import { dataMetadata } from '../../data/metadata.ts';
import type { Dataset } from '../../data/dataset.ts';
import { writeServerState } from '../checkpoint/serverState.ts';
import { modelHash, unsplitModelHash } from '../checkpoint/runConfigFiles.ts';
import { deviceFilesFit, splitGroupOf } from './deviceLayout.ts';
import { loadInitialWeights } from '../checkpoint/initFrom.ts';

/** Runs `fn` with the replica temporarily holding `params` (the strategy's model), then restores. */
export async function withParams<T>(replica: Replica, params: Float32Array, fn: () => T | Promise<T>): Promise<T> {
  const own = replica.model.params;
  if (params === own) return fn();
  const saved = own.slice();
  own.set(params);
  replica.weightsChanged();
  try {
    return await fn();
  } finally {
    own.set(saved);
    replica.weightsChanged();
  }
}

export interface DeviceCheckpointOptions {
  setup: CheckpointSetup | undefined;
  config: RunConfig;
  rank: number;
  worldSize: number;
  replica: Replica<TrainableModel>;
  strategy: Strategy;
  view: ReplicaView;
  comm?: Communicator;
  emit: EventSink;
  /** the training data: its description (task, class names, normalisation) goes into the set's model file */
  train?: Dataset;
  /** device 0: the watched metrics' records as of now, for state.json (evaluation.ts) */
  tracking?: () => SetState['tracking'];
}

/**
 * The loop hooks (firstStep, afterStart, onStepEnd, onStop) for this device's checkpoint sets and resume.
 * Called before the loop starts: a fine-tuned run's weights are loaded here, before the strategy's
 * onStart (which takes them as its start point).
 */
export function deviceCheckpointHooks(o: DeviceCheckpointOptions) {
  const { setup, config, rank, worldSize, replica, strategy } = o;
  if (!setup) return {};
  if (setup.initFrom) {
    loadInitialWeights(setup.initFrom, replica.model);
    replica.weightsChanged();
  }
  const resume = setup.resume;
  // async devices go on without lost peers, so none may wait for all at a set: device 0 writes the
  // set alone (the server's state as it stands: async has no common step boundary), and the others,
  // whose state is only counters beside the server's, start afresh on resume
  const alone = worldSize > 1 && survivesLostDevices(config.train.strategy);
  const writeSet = async (stepsDone: number, stepsPerEpoch: number): Promise<void> => {
    if (alone && rank !== 0) return;
    const dir = setup.runDir ? partialSetDir(setup.runDir, stepsDone) : null;
    // a GPU that keeps its weights and optimizer state: the host's copies first
    await replica.hostCopies();
    // a split model's gather is collective: every device takes part; it also assembles a sharded
    // optimizer's state whole (every device), before any device writes it
    const full = await replica.gather(rank, true);
    if (dir) writeDeviceState(dir, rank, replica, strategy, stepsDone);
    // a parameter server's state is the job's: every device's last update is in before device 0 reads it
    const server = strategy.serverSnapshot;
    if (server && worldSize > 1 && !alone) await o.comm!.barrier();
    if (server && rank === 0 && dir) writeServerState(dir, await server(), config.optimizer);
    if (full && dir) {
      const params =
        full !== (replica as unknown)
          ? full.model.params
          : strategy.modelParams
            ? await strategy.modelParams(o.view)
            : o.view.params;
      await withParams(full, params, () =>
        saveModelCheckpoint(join(dir, SET_MODEL_FILE), full.model, full.optimizer, {
          config: JSON.stringify(config),
          step: String(stepsDone),
          epoch: String(Math.floor(stepsDone / stepsPerEpoch)),
          strategy: strategy.name,
          ...(o.train ? dataMetadata({ train: o.train }) : {}),
        }),
      );
    }
    // every device's files are on disk before the set is declared complete (and the server's read)
    if (worldSize > 1 && !alone) await o.comm!.barrier();
    if (rank !== 0 || !setup.runDir) return;
    const state: SetState = {
      format: 'paratrain-set-1',
      step: stepsDone,
      epoch: Math.floor(stepsDone / stepsPerEpoch),
      stepInEpoch: stepsDone % stepsPerEpoch,
      devices: worldSize,
      processes: setup.processes,
      globalBatch: globalBatchSize(config, worldSize),
      stepsPerEpoch,
      strategy: worldSize > 1 ? config.train.strategy.type : 'single device',
      configHash: setup.configHash,
      modelHash: modelHash(config),
      unsplitModelHash: unsplitModelHash(config),
      splitGroup: splitGroupOf(config, worldSize),
      time: Date.now(),
    };
    const tracking = o.tracking?.();
    if (tracking) state.tracking = tracking;
    const pipeline = config.train.pipeline;
    if (pipeline)
      state.pipeline = { stages: pipeline.stages, ...(pipeline.boundaries ? { boundaries: pipeline.boundaries } : {}) };
    const path = completeSet(setup.runDir, state, config.train.keepLast);
    o.emit({ type: 'checkpoint', epoch: Math.floor((stepsDone - 1) / stepsPerEpoch), step: stepsDone, path });
  };
  return {
    firstStep: resume?.state.step ?? 0,
    afterStart:
      resume && !(alone && rank !== 0)
        ? () => {
            // another split or pipeline on either side: the set's model file has what this device holds
            if (deviceFilesFit(resume.state, config, worldSize))
              restoreDeviceState(resume, rank, worldSize, replica, strategy);
            else restoreFromWholeModel(resume, rank, worldSize, config, replica, strategy);
            replica.weightsChanged();
          }
        : undefined,
    async onStepEnd(stepsDone: number, stepsPerEpoch: number, totalSteps: number): Promise<void> {
      if (setDue(config, stepsDone, stepsPerEpoch, totalSteps)) await writeSet(stepsDone, stepsPerEpoch);
    },
    /**
     * a graceful stop: a set at the stop step, to resume from — unless the step's own set was just
     * written, or the run stopped where it started (a fresh run at step 0 has nothing to save; a
     * resumed one's set of that step is there, and is not written again)
     */
    async onStop(stepsDone: number, stepsPerEpoch: number, totalSteps: number): Promise<void> {
      if (stepsDone > (resume?.state.step ?? 0) && !setDue(config, stepsDone, stepsPerEpoch, totalSteps))
        await writeSet(stepsDone, stepsPerEpoch);
    },
  };
}
