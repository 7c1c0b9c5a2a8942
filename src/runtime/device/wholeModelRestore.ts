/**
 * Resuming where a set's device files do not fit this device's replica: a pipelined set resumed on
 * another layout (unpipelined, other stages or pipelines), or an unpipelined one resumed
 * pipelined. The set's model file holds the whole model, its BatchNorm statistics and its
 * optimizer's slots under the unsplit model's tensor names (a pipeline gathers them whole), so
 * each device takes its own tensors from there by name; the optimizer's flat slots are read
 * through the unsplit model's flat layout.
 */
import { join } from 'node:path';
import { readCheckpoint } from '../checkpoint/checkpoint.ts';
import { SET_MODEL_FILE } from '../checkpoint/checkpointSet.ts';
import type { ResumePoint } from '../checkpoint/checkpointSetup.ts';
import type { RunConfig } from '../../config/runConfig.ts';
import type { TrainableModel } from '../../nn/trainableModel.ts';
import { unsplitLayers } from '../../parallel/pipeline/stage.ts';
import { planFlatLayout } from '../../nn/flatLayout.ts';
import { hostBackend } from '../../kernels/hostBackend.ts';
import type { Replica } from './replica.ts';

type Checkpoint = ReturnType<typeof readCheckpoint>;
/** A tensor's name and place in a flat buffer. */
type Placed = { name: string; offset: number; size: number };

/**
 * The set's model file when this device must restore from it (a pipeline on either side, on
 * different layouts); null when its own device file fits.
 */
export function wholeModelSource(point: ResumePoint, config: RunConfig, devices: number): Checkpoint | null {
  const now = config.train.pipeline,
    before = point.state.pipeline;
  if (!now && !before) return null;
  const same =
    now &&
    before &&
    now.stages === before.stages &&
    point.state.devices === devices &&
    JSON.stringify(now.boundaries ?? null) === JSON.stringify(before.boundaries ?? null);
  return same ? null : readCheckpoint(join(point.dir, SET_MODEL_FILE));
}

/** Puts the whole model file's tensors that this replica holds back, with their optimizer slots. */
export function restoreFromWholeModel(
  file: Checkpoint,
  point: ResumePoint,
  config: RunConfig,
  replica: Replica<TrainableModel>,
): void {
  const { model, optimizer } = replica;
  const what = `the model file of ${point.dir}`;
  // a whole model or a pipeline stage: tensors named as in the unsplit model (a model-parallel shard is not)
  const { paramEntries: entries, stateEntries } = model as Partial<Record<'paramEntries' | 'stateEntries', Placed[]>>;
  if (!entries || !stateEntries)
    throw new Error(
      `checkpoint set ${point.dir} was written by a pipeline; it resumes on whole models or pipelines, not with 'parallel: model' layers`,
    );
  const named = (name: string) => {
    const t = file.tensors.get(name);
    if (!t) throw new Error(`checkpoint set: ${what} has no '${name}'; it was written for another model`);
    return t.data;
  };
  for (const e of entries) model.params.set(named(e.name).subarray(0, e.size), e.offset);
  for (const e of stateEntries) model.state.set(named(e.name).subarray(0, e.size), e.offset);
  const meta = file.metadata;
  if (meta['optimizer.type'] !== optimizer.spec.type)
    throw new Error(
      `checkpoint set ${point.dir} was written with optimizer ${meta['optimizer.type']}, the config asks for ${optimizer.spec.type}; keep the optimizer to resume (or start a new run with --init-from)`,
    );
  // the unsplit model's flat layout: where each tensor's optimizer slots lie in the file's flat buffers
  const whole = new Map(
    planFlatLayout(unsplitLayers(hostBackend(replica.backend), config.model).map((layer, index) => ({ index, layer })))
      .params.flat()
      .map((e) => [e.name, e]),
  );
  const buffers = [...file.tensors]
    .filter(([name]) => name.startsWith('optimizer.'))
    .map(([name, t]) => {
      const data = new Float32Array(model.params.length);
      for (const e of entries) {
        const at = whole.get(e.name);
        if (!at) throw new Error(`checkpoint set: ${what}: the model has no tensor '${e.name}'`);
        data.set(t.data.subarray(at.offset, at.offset + e.size), e.offset);
      }
      return { name: name.slice('optimizer.'.length), data };
    });
  optimizer.loadState({ step: Number(meta['optimizer.step'] ?? 0), buffers });
}
