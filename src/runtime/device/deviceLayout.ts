/**
 * What a checkpoint set's device files are cut for, and whether this job's devices can take them
 * back as they are. A whole model on every device (one device, data parallelism) takes them on any
 * count by the resize rule (deviceState.ts); a model whose `parallel: model` layers are split holds
 * shards cut for its group of devices, and a pipeline stages: on another layout each device takes
 * its part of the set's model file instead, which holds the unsplit model and its optimizer slots
 * (wholeModelRestore.ts).
 */
import type { RunConfig } from '../../config/runConfig.ts';
import type { SetState } from '../checkpoint/checkpointSet.ts';
import { modelHash } from '../checkpoint/runConfigFiles.ts';
import { modelParallelLayers } from '../../parallel/modelParallel/plan.ts';

/**
 * The devices each `parallel: model` layer is split over on a job of `devices` devices: the
 * tensor-parallel group (train.tensorParallel, else the whole job); 1 where nothing is split (no
 * marks, one device, a pipeline).
 */
export function splitGroupOf(config: Pick<RunConfig, 'model' | 'train'>, devices: number): number {
  if (devices < 2 || config.train.pipeline || modelParallelLayers(config.model).length === 0) return 1;
  const tp = config.train.tensorParallel;
  return tp !== undefined && tp < devices ? tp : devices;
}

/**
 * The split group of a set's devices: its state's, or for a set written before state.json recorded
 * it, the run's (its model hash matched the config's, so the marks are the config's; its
 * tensorParallel is the run's config.yaml's where readable).
 */
export function savedSplitGroup(state: SetState, saved: RunConfig | null, given: RunConfig): number {
  if (state.splitGroup !== undefined) return state.splitGroup;
  if (state.pipeline) return 1;
  const run = saved && modelHash(saved) === state.modelHash ? saved : given;
  return splitGroupOf({ model: run.model, train: { ...run.train, pipeline: undefined } }, state.devices);
}

/** Whether this job's devices take the set's device files back (else each takes its part of the model file). */
export function deviceFilesFit(state: SetState, config: RunConfig, devices: number): boolean {
  const now = config.train.pipeline,
    before = state.pipeline;
  if (now || before)
    return (
      !!now &&
      !!before &&
      now.stages === before.stages &&
      state.devices === devices &&
      JSON.stringify(now.boundaries ?? null) === JSON.stringify(before.boundaries ?? null)
    );
  const group = splitGroupOf(config, devices),
    saved = state.splitGroup ?? 1;
  // whole replicas on both sides: any count, by the resize rule
  if (group === 1 && saved === 1) return true;
  // shards: only the same cut, of the same layers, on the same devices
  return group === saved && state.devices === devices && state.modelHash === modelHash(config);
}
