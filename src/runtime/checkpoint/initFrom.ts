/**
 * Fine-tuning (`train.initFrom`, `--init-from CHECKPOINT`): a new run starts from a checkpoint's
 * weights and state (BatchNorm statistics) with a fresh optimizer at step 0, but for the layers
 * that start from the model's fresh initialisation (`reinit`). What fits and what starts fresh is
 * decided before any work (initFromPlan.ts); here each device (and a parameter server) loads it.
 */
import { readCheckpoint } from './checkpoint.ts';
import type { InitialWeights } from './checkpointSetup.ts';
import { layerOfTensor } from './initFromPlan.ts';
import type { Sequential } from '../../nn/model.ts';
import { ModelParallelNet } from '../../parallel/modelParallel/net.ts';
import type { TrainableModel } from '../../nn/trainableModel.ts';
import type { RunConfig } from '../../config/runConfig.ts';
import { formatShape, shapesEqual } from '../../tensor/shape.ts';

/** The index in model.layers of `layers.N` (a name the config schema has checked). */
export const layerIndex = (name: string): number => Number(name.slice('layers.'.length));

/** What the devices of a new run load (null: no train.initFrom); call after planInitFrom resolved reinit. */
export function initialWeightsOf(config: RunConfig): InitialWeights | null {
  const spec = config.train.initFrom;
  if (!spec) return null;
  if (spec.reinit === 'mismatched') throw new Error('initialWeightsOf: train.initFrom.reinit is not resolved yet');
  return { path: spec.path, reinit: spec.reinit.map(layerIndex) };
}

/**
 * Puts the checkpoint's weights and state into this device's model (a split model takes its
 * shards), leaving the `reinit` layers as the model initialised them.
 */
export function loadInitialWeights(weights: InitialWeights, model: TrainableModel): void {
  const { path } = weights;
  const fresh = new Set(weights.reinit.map((i) => `layers.${i}`));
  const { tensors } = readCheckpoint(path);
  const get = (name: string, shape?: readonly number[]) => {
    const t = tensors.get(name);
    if (!t) throw new Error(`checkpoint ${path} has no tensor '${name}': it was written for a different model`);
    if (shape && !shapesEqual(t.shape, shape))
      throw new Error(
        `checkpoint ${path}: '${name}' has shape ${formatShape(t.shape)}, the model needs ${formatShape(shape)}; it was written for a different model`,
      );
    return t.data;
  };
  const loaded = (name: string) => !fresh.has(layerOfTensor(name) ?? '');
  if (!(model instanceof ModelParallelNet)) {
    const whole = model as unknown as Sequential;
    for (const e of whole.paramEntries) if (loaded(e.name)) whole.params.set(get(e.name, e.shape), e.offset);
    for (const e of whole.stateEntries) if (loaded(e.name)) whole.state.set(get(e.name, e.shape), e.offset);
    return;
  }
  for (const e of model.replicatedEntries) if (loaded(e.name)) model.params.set(get(e.name, e.shape), e.offset);
  for (const e of model.stateEntries) if (loaded(e.name)) model.state.set(get(e.name, e.shape), e.offset);
  model.loadShards(get, (layer) => fresh.has(`layers.${layer}`));
}
