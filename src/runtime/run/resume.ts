/**
 * Opening a run to resume (`--resume RUN_DIR`, or one of its sets: `RUN_DIR/checkpoints/step-N`):
 * remove what a dead writer left, choose the set (the newest that verifies, or the one named:
 * checkpoint/resumeSet.ts), check the config still describes the same model (its `parallel: model`
 * marks may change: device/deviceLayout.ts), and fit the config to the saved run when the job's
 * device count changed (the global batch, the data order and the learning rate stay the saved job's).
 */
import { join } from 'node:path';
import type { RunConfig } from '../../config/runConfig.ts';
import { removeLeftovers } from '../checkpoint/checkpointSet.ts';
import { chooseResumeSet, supersedeNewerSets } from '../checkpoint/resumeSet.ts';
import { resumeTarget } from './resumeTarget.ts';
import { RunFinishedError } from './runFinished.ts';
import { modelHash, unsplitModelHash, CONFIG_FILE, readRunConfig } from '../checkpoint/runConfigFiles.ts';
import type { SetState } from '../checkpoint/checkpointSet.ts';
import { savedSplitGroup } from '../device/deviceLayout.ts';
import { resumeChanges } from './resumeChanges.ts';
import type { ResumePoint } from '../checkpoint/checkpointSetup.ts';
import type { TrainEvent } from '../events/events.ts';
import { globalBatchSize } from '../device/trainLoop.ts';
import { modelParallelLayers } from '../../parallel/modelParallel/plan.ts';

export interface ResumePlan {
  point: ResumePoint;
  /** the config, fitted to the saved run */
  config: RunConfig;
  event: Extract<TrainEvent, { type: 'resume' }>;
  /** the run directory (`--resume` may name one of its sets) */
  runDir: string;
}

/** Checks `--resume PATH` before any work (a run directory, or one of its sets); returns the run directory. */
export function checkResumeDir(path: string): string {
  return resumeTarget(path).runDir;
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
  const target = resumeTarget(runDir);
  if (clean) {
    const removed = removeLeftovers(target.runDir);
    if (removed.length) log?.(`removed what an interrupted run left in ${target.runDir}: ${removed.join(', ')}`);
  }
  const asked = `--resume ${runDir}`;
  const latest = chooseResumeSet({ runDir: target.runDir, named: target.step, config, clean, asked, log });
  const saved = readRunConfig(target.runDir);
  // a set written before state.json recorded its split: the run's (its model hash is the config's, or it is refused below)
  const state = { ...latest.state, splitGroup: savedSplitGroup(latest.state, saved, config) };
  const point = { ...latest, state };
  checkSameModel(runDir, target.runDir, point.dir, state, config);
  // every other change to the run's config: refused here, or honoured with a line once the resume goes ahead
  const honoured = resumeChanges({ runDir: target.runDir, setDir: latest.dir, state, saved, given: config, devices });
  if (state.modelHash !== modelHash(config)) honoured.push(`resume: ${marksLine(saved, config)}`);
  const fitted = fitToSavedJob(config, devices, state.devices, state.globalBatch);
  const { stepsPerEpoch } = state;
  if (state.step >= stepsPerEpoch * fitted.train.epochs)
    throw new RunFinishedError(target.runDir, state.step, Math.floor(state.step / stepsPerEpoch));
  for (const line of honoured) log?.(line);
  // a named set: the newer sets go aside only once the resume is sure to go ahead
  if (clean && target.step !== null) supersedeNewerSets(target.runDir, latest, log);
  return {
    runDir: target.runDir,
    point,
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
 * The config's model must be the one the run trained, but for its `parallel: model` marks: the
 * set's model file holds the unsplit model, so a split run resumes unsplit and the reverse (sets
 * written before state.json recorded the unsplit model's hash keep their marks).
 */
function checkSameModel(asked: string, runDir: string, setDir: string, state: SetState, config: RunConfig): void {
  if (state.modelHash === modelHash(config)) return;
  if (state.unsplitModelHash !== undefined && state.unsplitModelHash === unsplitModelHash(config)) return;
  throw new Error(
    `--resume ${asked}: the config's model differs from the one the run trained (checkpoint ${setDir}); ` +
      `resume with the run's own config (${join(runDir, CONFIG_FILE)}), or start a new run from its weights with --init-from ${join(setDir, 'model.safetensors')}`,
  );
}

/** The line for a resume whose `parallel: model` marks changed: the layers split before and now. */
function marksLine(saved: RunConfig | null, config: RunConfig): string {
  const layers = (c: RunConfig) => {
    const split = modelParallelLayers(c.model);
    return split.length ? split.map((i) => `model.layers[${i}]`).join(', ') : 'none';
  };
  return `the layers marked 'parallel: model' ${saved ? `${layers(saved)} → ` : 'are now '}${layers(config)}; each device takes its part of the set's model file`;
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

/** The config `paratrain train` reads: the one given, or with --resume the run's own config.yaml (a named set's run's). */
export function trainConfigPath(given: string | undefined, resume: string | undefined): string {
  if (given !== undefined) return given;
  if (resume === undefined)
    throw new Error(
      'train: give a YAML run configuration (e.g. paratrain train examples/mnist-small.yaml), or --resume RUN_DIR',
    );
  return join(checkResumeDir(resume), CONFIG_FILE);
}
