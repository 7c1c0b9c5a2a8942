/**
 * Opening a run to resume (`--resume RUN_DIR`): remove what a dead writer left, find the newest
 * complete checkpoint set, check the config still describes the same model, and fit the config
 * to the saved run when the job's device count changed (the global batch, the data order and the
 * learning rate stay the saved job's).
 */
import { existsSync, statSync } from 'node:fs';
import { join } from 'node:path';
import type { RunConfig } from '../../config/runConfig.ts';
import { latestCompleteSet, removeLeftovers, CHECKPOINTS_DIR } from '../checkpoint/checkpointSet.ts';
import { modelHash, CONFIG_FILE } from '../checkpoint/runConfigFiles.ts';
import type { ResumePoint } from '../checkpoint/checkpointSetup.ts';
import type { TrainEvent } from '../events/events.ts';
import { globalBatchSize } from '../device/trainLoop.ts';
import { modelParallelLayers } from '../../parallel/modelParallel/plan.ts';

export interface ResumePlan {
  point: ResumePoint;
  /** the config, fitted to the saved run */
  config: RunConfig;
  event: Extract<TrainEvent, { type: 'resume' }>;
}

/** Checks `--resume runDir` before any work: the directory exists and is a run directory. */
export function checkResumeDir(runDir: string): void {
  if (!existsSync(runDir))
    throw new Error(
      `--resume ${runDir}: no such run directory; give the directory of the run to continue (e.g. runs/latest)`,
    );
  if (!statSync(runDir).isDirectory())
    throw new Error(
      `--resume ${runDir}: not a directory; give the directory of the run to continue (e.g. runs/latest)`,
    );
}

/**
 * The resume plan for `runDir` with `config` on a job of `devices` devices (JobShape.devices).
 * `clean`: remove leftovers (process 0 only); `log` reports what was removed.
 */
export function planResume(
  runDir: string,
  config: RunConfig,
  devices: number,
  clean: boolean,
  log?: (m: string) => void,
): ResumePlan {
  checkResumeDir(runDir);
  if (clean) {
    const removed = removeLeftovers(runDir);
    if (removed.length) log?.(`removed what an interrupted run left in ${runDir}: ${removed.join(', ')}`);
  }
  const latest = latestCompleteSet(runDir);
  if (!latest) {
    throw new Error(
      `--resume ${runDir}: no complete checkpoint set in ${join(runDir, CHECKPOINTS_DIR)} (the run stopped before its first one); ` +
        `start the run again without --resume, with train.checkpointEvery: { steps: N } to save sooner`,
    );
  }
  const { state } = latest;
  if (state.modelHash !== modelHash(config)) {
    throw new Error(
      `--resume ${runDir}: the config's model differs from the one the run trained (checkpoint ${latest.dir}); ` +
        `resume with the run's own config (${join(runDir, CONFIG_FILE)}), or start a new run from its weights with --init-from ${join(latest.dir, 'model.safetensors')}`,
    );
  }
  checkModelParallelSize(runDir, latest.dir, config, devices, state.devices);
  const fitted = fitToSavedJob(config, devices, state.devices, state.globalBatch);
  const { stepsPerEpoch } = state;
  if (state.step >= stepsPerEpoch * fitted.train.epochs) {
    throw new Error(
      `--resume ${runDir}: the run is complete (step ${state.step}, epoch ${state.epoch} of ${fitted.train.epochs}); ` +
        `pass --epochs with more than ${Math.ceil(state.step / stepsPerEpoch)} to train it further`,
    );
  }
  return {
    point: latest,
    config: fitted,
    event: {
      type: 'resume',
      step: state.step,
      epoch: state.epoch,
      fromDevices: state.devices,
      devices,
      checkpoint: latest.dir,
    },
  };
}

/**
 * A model-parallel run's device files hold shards cut for its device count (docs/architecture.md,
 * resizing): on another count they cannot be put back, so the run resumes on its own count, or a new
 * run starts from the gathered model.
 */
function checkModelParallelSize(
  runDir: string,
  setDir: string,
  config: RunConfig,
  devices: number,
  savedDevices: number,
): void {
  if (devices === savedDevices) return;
  const split = modelParallelLayers(config.model);
  if (split.length === 0) return;
  throw new Error(
    `--resume ${runDir}: the run trained its model-parallel layers (${split.map((i) => `model.layers[${i}]`).join(', ')}) split over ${savedDevices} device${savedDevices === 1 ? '' : 's'}, ` +
      `and a model-parallel run resumes on the same device count only; resume with --devices ${savedDevices} (for a job of several processes: processes × devices = ${savedDevices}), ` +
      `or start a new run on ${devices} devices from its weights with --init-from ${join(setDir, 'model.safetensors')}`,
  );
}

/**
 * The config on the job's new device count `devices`, doing the saved job's maths: the same global
 * batch (a per-device batch becomes a global one; the sampler splits it as evenly as it can) and,
 * with linear learning-rate scaling, the same scaled learning rate.
 */
export function fitToSavedJob(
  config: RunConfig,
  devices: number,
  savedDevices: number,
  savedGlobalBatch: number,
): RunConfig {
  if (devices === savedDevices && globalBatchSize(config, devices) === savedGlobalBatch) return config;
  const data = { ...config.data, batchSize: savedGlobalBatch, batchSizeScope: 'global' as const };
  const optimizer =
    config.train.lrScaling === 'linear'
      ? { ...config.optimizer, lr: (config.optimizer.lr * savedDevices) / devices }
      : config.optimizer;
  return { ...config, data, optimizer };
}

/** The config `paratrain train` reads: the one given, or with --resume the run's own config.yaml. */
export function trainConfigPath(given: string | undefined, resume: string | undefined): string {
  if (given !== undefined) return given;
  if (resume === undefined)
    throw new Error(
      'train: give a YAML run configuration (e.g. paratrain train examples/mnist-small.yaml), or --resume RUN_DIR',
    );
  checkResumeDir(resume);
  return join(resume, CONFIG_FILE);
}
