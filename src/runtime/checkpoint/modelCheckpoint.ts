import type { Sequential } from '../../nn/model.ts';
import type { Optimizer, OptimizerState } from '../../optim/optimizer.ts';
import { formatShape, shapesEqual } from '../../tensor/shape.ts';
import { readCheckpoint, writeCheckpoint } from './checkpoint.ts';

/**
 * Model checkpoints: every parameter and state tensor under its stable name ('layers.3.kernel'),
 * optimizer buffers under 'optimizer.<name>' (flat), and the config in the metadata.
 */
export function saveModelCheckpoint(
  path: string,
  model: Sequential,
  optimizer: Optimizer | null,
  metadata: Record<string, string>,
): void {
  const tensors = [
    ...model.paramEntries.map((e) => ({
      name: e.name,
      shape: e.shape,
      data: model.params.subarray(e.offset, e.offset + e.size),
    })),
    ...model.stateEntries.map((e) => ({
      name: e.name,
      shape: e.shape,
      data: model.state.subarray(e.offset, e.offset + e.size),
    })),
  ];
  const meta: Record<string, string> = { ...metadata, format: 'paratrain-checkpoint-1' };
  if (optimizer) {
    const state = optimizer.state();
    for (const b of state.buffers) tensors.push({ name: `optimizer.${b.name}`, shape: [b.data.length], data: b.data });
    meta['optimizer.step'] = String(state.step);
    meta['optimizer.type'] = optimizer.spec.type;
    Object.assign(meta, optimizerFrozenMeta(state));
  }
  writeCheckpoint(path, tensors, meta);
}

/** Loads weights (and optimizer state when given) into a built model; mismatches name the tensor. */
export function loadModelCheckpoint(
  path: string,
  model: Sequential,
  optimizer: Optimizer | null = null,
): Record<string, string> {
  const { tensors, metadata } = readCheckpoint(path);
  const fill = (entries: typeof model.paramEntries, into: Float32Array) => {
    for (const e of entries) {
      const t = tensors.get(e.name);
      if (!t)
        throw new Error(
          `checkpoint ${path} has no tensor '${e.name}': it was written for a different model (compare the model.layers of both configs)`,
        );
      if (!shapesEqual(t.shape, e.shape)) {
        throw new Error(
          `checkpoint ${path}: '${e.name}' has shape ${formatShape(t.shape)}, the model needs ${formatShape(e.shape)}; it was written for a different model`,
        );
      }
      into.set(t.data, e.offset);
    }
  };
  fill(model.paramEntries, model.params);
  fill(model.stateEntries, model.state);
  if (optimizer && metadata['optimizer.type'] === optimizer.spec.type) {
    const buffers = [...tensors]
      .filter(([name]) => name.startsWith('optimizer.'))
      .map(([name, t]) => ({ name: name.slice(10), data: t.data }));
    optimizer.loadState({
      step: Number(metadata['optimizer.step'] ?? 0),
      buffers,
      ...optimizerFrozenFromMeta(metadata),
    });
  }
  return metadata;
}

/** Adam's frozen-variance step (1-bit Adam) as checkpoint metadata: none while it is not frozen. */
export function optimizerFrozenMeta(state: OptimizerState): Record<string, string> {
  return state.varianceFrozenAt === undefined ? {} : { 'optimizer.varianceFrozenAt': String(state.varianceFrozenAt) };
}

/** The metadata's frozen-variance step back (a checkpoint without one: not frozen). */
export function optimizerFrozenFromMeta(meta: Record<string, string>): Pick<OptimizerState, 'varianceFrozenAt'> {
  const at = meta['optimizer.varianceFrozenAt'];
  return at === undefined ? {} : { varianceFrozenAt: Number(at) };
}
