/**
 * Resuming where a set's device files do not fit this device's replica (deviceLayout.ts): a
 * pipelined set on another layout, or one resumed pipelined; a model-parallel set on another
 * device count, tensor-parallel group or `parallel: model` marks, or resumed split. The set's
 * model file holds the whole model, its BatchNorm statistics and its optimizer's slots under the
 * unsplit model's tensor names (a pipeline and a split model gather them whole), so each device
 * takes its own tensors from there by name — a split layer's shard as the pieces of the unsplit
 * tensor it holds (shards.ts) —, and its optimizer slots through the unsplit model's flat layout
 * the same way: what the devices hold is then exactly what the set saved.
 */
import { join } from 'node:path';
import { readCheckpoint } from '../checkpoint/checkpoint.ts';
import { SET_MODEL_FILE } from '../checkpoint/checkpointSet.ts';
import type { ResumePoint } from '../checkpoint/checkpointSetup.ts';
import { modelHash } from '../checkpoint/runConfigFiles.ts';
import { optimizerFrozenFromMeta } from '../checkpoint/modelCheckpoint.ts';
import type { RunConfig } from '../../config/runConfig.ts';
import type { TrainableModel } from '../../nn/trainableModel.ts';
import type { FlatEntry } from '../../nn/flatLayout.ts';
import { unsplitLayers } from '../../parallel/pipeline/stage.ts';
import { ModelParallelNet } from '../../parallel/modelParallel/net.ts';
import { copyPieces, type Piece } from '../../parallel/modelParallel/shards.ts';
import { planFlatLayout } from '../../nn/flatLayout.ts';
import { hostBackend } from '../../kernels/hostBackend.ts';
import type { Strategy } from '../../parallel/strategy.ts';
import { splitGroupOf } from './deviceLayout.ts';
import { readDeviceFile, restoreStrategyState, sourceDevice } from './deviceState.ts';
import type { Replica } from './replica.ts';

/** A tensor this device holds: its unsplit name, its place in params, the pieces of the unsplit tensor it is. */
interface Held {
  name: string;
  offset: number;
  size: number;
  pieces: readonly Piece[];
}

const whole = (e: FlatEntry): Held => ({ ...e, pieces: [{ start: 0, rows: 1, stride: 0, width: e.size }] });

/** The tensors of params this device holds: a whole model's or a stage's, or a split model's replicated ones and shards. */
function heldTensors(model: TrainableModel): { params: Held[]; state: readonly FlatEntry[] } | null {
  if (model instanceof ModelParallelNet)
    return { params: [...model.replicatedEntries.map(whole), ...model.shardEntries], state: model.stateEntries };
  const { paramEntries, stateEntries } = model as Partial<Record<'paramEntries' | 'stateEntries', FlatEntry[]>>;
  return paramEntries && stateEntries ? { params: paramEntries.map(whole), state: stateEntries } : null;
}

function readModelFile(point: ResumePoint): ReturnType<typeof readCheckpoint> {
  try {
    return readCheckpoint(join(point.dir, SET_MODEL_FILE));
  } catch (e) {
    // device 0 writes the model file: another process reads it only from one directory on a shared file system
    const multi = point.state.processes > 1 ? ' (in a job of several processes, resume from a shared file system)' : '';
    throw new Error(
      `${(e as Error).message}; resumed on another layout, every device takes its part of the set's model file${multi}; resume on the run's own layout, or from another set`,
      { cause: e },
    );
  }
}

/**
 * Puts the tensors of the set's model file that this replica holds back, with their optimizer
 * slots; the strategy's state too where the replicated part kept its layout (the same marks, split
 * before and now: device r′ takes saved device ⌊r′·G/G′⌋'s), else the strategy starts afresh.
 */
export function restoreFromWholeModel(
  point: ResumePoint,
  rank: number,
  devices: number,
  config: RunConfig,
  replica: Replica<TrainableModel>,
  strategy: Strategy,
): void {
  const file = readModelFile(point);
  const { model, optimizer } = replica;
  const what = `the model file of ${point.dir}`;
  const held = heldTensors(model);
  if (!held) throw new Error(`checkpoint set ${point.dir}: this device's model has no tensor names to restore by`);
  // the unsplit model's flat layout: each tensor's size, and where its optimizer slots lie in the file's flat buffers
  const layout = planFlatLayout(
    unsplitLayers(hostBackend(replica.backend), config.model).map((layer, index) => ({ index, layer })),
  );
  const unsplit = new Map([...layout.params.flat(), ...layout.state.flat()].map((e) => [e.name, e]));
  const entry = (name: string) => {
    const e = unsplit.get(name);
    if (!e) throw new Error(`checkpoint set: ${what}: the model has no tensor '${name}'`);
    return e;
  };
  const named = (name: string) => {
    const t = file.tensors.get(name);
    if (!t || t.data.length !== entry(name).size)
      throw new Error(
        `checkpoint set: ${what} ${t ? `holds ${t.data.length} values of '${name}', the model ${entry(name).size}` : `has no '${name}'`}; it was written for another model`,
      );
    return t.data;
  };
  // the unsplit tensor `full` into this device's buffer `into` (laid out like params)
  const take = (e: Held, full: Float32Array, into: Float32Array) =>
    copyPieces(full, into.subarray(e.offset, e.offset + e.size), e.pieces, true);
  for (const e of held.params) take(e, named(e.name), model.params);
  for (const e of held.state) model.state.set(named(e.name), e.offset);
  const meta = file.metadata;
  if (meta['optimizer.type'] !== optimizer.spec.type)
    throw new Error(
      `checkpoint set ${point.dir} was written with optimizer ${meta['optimizer.type']}, the config asks for ${optimizer.spec.type}; keep the optimizer to resume (or start a new run with --init-from)`,
    );
  const buffers = [...file.tensors]
    .filter(([name]) => name.startsWith('optimizer.'))
    .map(([name, t]) => {
      if (t.data.length !== Math.max(layout.paramLength, 1))
        throw new Error(
          `checkpoint set: ${what} holds ${t.data.length} values of '${name}', the model's optimizer ${Math.max(layout.paramLength, 1)}; it was written for another model`,
        );
      const data = new Float32Array(model.params.length);
      for (const e of held.params) {
        const at = entry(e.name);
        take(e, t.data.subarray(at.offset, at.offset + at.size), data);
      }
      return { name: name.slice('optimizer.'.length), data };
    });
  optimizer.loadState({ step: Number(meta['optimizer.step'] ?? 0), buffers, ...optimizerFrozenFromMeta(meta) });
  const { state } = point;
  const split = splitGroupOf(config, devices) > 1 && (state.splitGroup ?? 1) > 1;
  if (split && state.modelHash === modelHash(config))
    restoreStrategyState(readDeviceFile(point, sourceDevice(rank, state.devices, devices)), strategy);
}
