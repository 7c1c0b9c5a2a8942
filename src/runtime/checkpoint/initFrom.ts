/**
 * Fine-tuning (`--init-from CHECKPOINT`): a new run starts from a checkpoint's weights and state
 * (BatchNorm statistics) with a fresh optimizer at step 0. The checkpoint must hold exactly the
 * config's tensors, with the same shapes: the first one that differs is named with both shapes.
 */
import { readCheckpoint } from './checkpoint.ts';
import { loadModelCheckpoint } from './modelCheckpoint.ts';
import { buildModel, type Sequential } from '../../nn/model.ts';
import { jsBackend } from '../../kernels/js/index.ts';
import { ModelParallelNet } from '../../parallel/modelParallel/net.ts';
import { copyShard } from '../../parallel/modelParallel/shards.ts';
import type { TrainableModel } from '../../nn/trainableModel.ts';
import type { RunConfig } from '../../config/runConfig.ts';

/** Checks before any work that the checkpoint fits the config's model (names the first mismatching tensor). */
export function checkInitFrom(path: string, config: RunConfig): void {
  const model = buildModel(jsBackend, config.model);
  loadModelCheckpoint(path, model);
  const known = new Set([...model.paramEntries, ...model.stateEntries].map((e) => e.name));
  const extra = [...readCheckpoint(path).tensors.keys()].find((n) => n.startsWith('layers.') && !known.has(n));
  if (extra)
    throw new Error(
      `--init-from ${path}: the checkpoint has a tensor '${extra}' the config's model lacks; it was written for a different model (compare the model.layers of both configs)`,
    );
}

/** Puts the checkpoint's weights and state into this device's model (a split model takes its shards). */
export function loadInitialWeights(path: string, model: TrainableModel): void {
  if (!(model instanceof ModelParallelNet)) {
    loadModelCheckpoint(path, model as unknown as Sequential);
    return;
  }
  const { tensors } = readCheckpoint(path);
  const get = (name: string) => {
    const t = tensors.get(name);
    if (!t) throw new Error(`checkpoint ${path} has no tensor '${name}': it was written for a different model`);
    return t.data;
  };
  for (const e of model.replicatedEntries) model.params.set(get(e.name), e.offset);
  for (const e of model.stateEntries) model.state.set(get(e.name), e.offset);
  for (const p of model.plan.layers) {
    if (p.kind === 'elementwise' || p.kind === 'spatial') continue;
    const kernel = get(`layers.${p.index}.kernel`),
      bias = p.spec.useBias ? get(`layers.${p.index}.bias`) : undefined;
    copyShard(p.index, { kernel, bias }, model.shardEntries, model.params, 0, true);
  }
}
