import { Tensor } from '../../tensor/tensor.ts';
import { Sequential } from '../../nn/model.ts';
import type { FlatEntry } from '../../nn/flatLayout.ts';
import type { ForwardContext } from '../../nn/layer.ts';
import type { TrainableModel } from '../../nn/trainableModel.ts';
import { allFinite } from '../../parallel/nonFinite.ts';
import type { SequenceBatch } from '../../data/batcher.ts';
import { shapeSize, VARIABLE } from '../../tensor/shape.ts';
import type { Poison } from './badSteps.ts';
import type { GradientSource } from './gradientSource.ts';
import type { ShardEntry } from '../../parallel/modelParallel/shards.ts';

/** What the probe needs of a replica: its model, and its step's gradients computed again. */
export interface ProbedReplica extends GradientSource {
  readonly model: TrainableModel;
}

/** One step's inputs, to run it again for the diagnosis. */
export interface ProbeBatch {
  images: Float32Array;
  labels: Int32Array;
  /** regression values or multi-hot labels, when the dataset has them */
  targets?: Float32Array;
  /** a sequence batch's lengths (ctx.lengths holds them too) and label counts */
  sequence?: SequenceBatch;
  ctx: ForwardContext;
  gradScale: number;
  globalBatchSize: number;
  /** the injected fault, if this step had one (applied to the recomputed gradients too) */
  poison?: Poison;
}

/**
 * Where a non-finite value first appears in this device's step, run again on its batch with the
 * weights the skipped step had (they are unchanged, the step was skipped): the first layer whose
 * output holds a NaN/Inf (a whole model without communicating layers: layer by layer), else the
 * loss, else the first tensor whose gradient does. Null when this device's step is finite (the
 * value came from another device, or from summing finite gradients). Runs forward and backward
 * once more, so every device of a lockstep job calls it at the same step (layers may communicate).
 */
export async function locateNonFinite(replica: ProbedReplica, b: ProbeBatch): Promise<string | null> {
  const model = replica.model;
  let where: string | null = null;
  const n = b.sequence ? b.sequence.lengths.length : b.images.length / shapeSize(model.inputShape);
  if (model instanceof Sequential && !model.needsAsync && n > 0) {
    let h = new Tensor(
      [n, ...model.inputShape.map((d) => (d === VARIABLE ? b.sequence!.frames : d))],
      b.images.slice(),
    );
    let ctx: ForwardContext = { ...b.ctx, training: true };
    for (const layer of model.layers) {
      h = layer.forward(h, ctx);
      await model.device?.toHost([h.data]);
      if (!allFinite(h.data)) {
        where = `the output of ${layer.name}`;
        break;
      }
      if (ctx.lengths && layer.outputLengths) ctx = { ...ctx, lengths: layer.outputLengths(ctx.lengths) };
    }
  }
  replica.zeroGrads(b.poison);
  const r = await replica.computeGradientsAsync(
    b.images,
    b.labels,
    b.ctx,
    b.gradScale,
    undefined,
    b.globalBatchSize,
    b.targets,
    b.sequence,
  );
  // a GPU that keeps its gradient lets the host see it here
  await model.device?.toHost([model.grads]);
  if (where) return where;
  if (!Number.isFinite(r.lossSum)) return 'the loss';
  for (const e of gradientEntries(model)) {
    if (!allFinite(model.grads.subarray(e.offset, e.offset + e.size))) return `the gradient of ${e.name}`;
  }
  return allFinite(model.grads) ? null : 'the gradients';
}

/** The model's parameter tensors by name: a whole model's, or a split one's replicated tensors then this device's shards ("its shard of layers.5.kernel"). */
function gradientEntries(model: TrainableModel): { name: string; offset: number; size: number }[] {
  const m = model as {
    paramEntries?: readonly FlatEntry[];
    replicatedEntries?: readonly FlatEntry[];
    shardEntries?: readonly ShardEntry[];
  };
  if (m.paramEntries) return [...m.paramEntries];
  return [
    ...(m.replicatedEntries ?? []),
    ...(m.shardEntries ?? []).map((e) => ({ name: `its shard of ${e.name}`, offset: e.offset, size: e.size })),
  ];
}
