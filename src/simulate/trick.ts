/**
 * "One weird trick" as the simulator sees it: the model-parallel section that
 * parallel/modelParallel/plan.ts makes of the model on G devices, turned into the collectives one
 * step runs (the activation exchanges of tensorParallel.ts, channelSplit.ts, spatialParallelStage.ts
 * and sliceRows.ts, in the sizes activationExchange.ts pads them to) and the compute each device
 * does. A split layer computes its share of the job's whole batch: as many FLOPs as the unsplit
 * layer on this device's rows, so it costs the measured unsplit layer at the per-device batch;
 * an element-wise layer on the 'full' form (every device, every sample, all features) costs the
 * unsplit layer at the whole batch.
 */
import { planModelParallelFrom, modelParallelLayers, type ModelParallelPlan } from '../parallel/modelParallel/plan.ts';
import { shardLayout } from '../parallel/modelParallel/shards.ts';
import type { LayerSpec, ModelSpec } from '../nn/spec.ts';
import { timeAt, type ModelCosts } from './layerCosts.ts';

/** The collectives a model-parallel section runs. */
export type CollectiveKind = 'allgather' | 'reduceScatter' | 'allreduce';

/** One collective of the section on every device: `floats` is the buffer each passes to the transport. */
export interface Exchange {
  what: string;
  op: CollectiveKind;
  floats: number;
}

/** One trick step's collectives and compute, or why the split is impossible. */
export type TrickWorkload =
  | {
      feasible: true;
      exchanges: Exchange[];
      compute: number;
      replicatedFloats: number;
      /** the fullest device's shards (device 0: the first devices take a split's extra units) */
      shardFloats: number;
      plan: ModelParallelPlan;
    }
  | { feasible: false; reason: string };

/** The model with every layer data-parallel (what the strategies other than the trick run). */
export function stripMarks(spec: ModelSpec): ModelSpec {
  return {
    ...spec,
    layers: spec.layers.map((l): LayerSpec => {
      if (l.type === 'dense') return { ...l, parallel: 'data' };
      if ((l.type === 'conv2d' || l.type === 'spatialSplit') && l.parallel === 'model') {
        const { parallel: _, ...rest } = l;
        return rest;
      }
      return l;
    }),
  };
}

/** The model as the trick runs it: its own marks, or (none marked) every dense layer marked, as `model.parallel: model` does. */
export function markForTrick(spec: ModelSpec): ModelSpec {
  if (modelParallelLayers(spec).length) return spec;
  return { ...spec, layers: spec.layers.map((l): LayerSpec => (l.type === 'dense' ? { ...l, parallel: 'model' } : l)) };
}

/**
 * The section's collectives and the compute of one step on G devices, `totalRows` samples in the
 * step (each device holds ⌈totalRows/G⌉ at most). Infeasible splits (more devices than units)
 * come back with paratrain's own message.
 */
export function trickWorkload(spec: ModelSpec, costs: ModelCosts, G: number, totalRows: number): TrickWorkload {
  if (!modelParallelLayers(spec).length) return { feasible: false, reason: 'the model has no dense layer to split' };
  let plan: ModelParallelPlan;
  try {
    plan = planModelParallelFrom(
      spec,
      G,
      costs.layers.map((l) => l.inputShape),
    );
  } catch (e) {
    return { feasible: false, reason: (e as Error).message };
  }
  const rows = Math.ceil(totalRows / G),
    padded = rows * G;
  const size = (shape: readonly number[]) => shape.reduce((a, b) => a * b, 1);
  const exchanges: Exchange[] = [];
  let compute = 0,
    splitParams = 0;
  const at = (i: number, batch: number) =>
    timeAt(costs.layers[i]!.forward, batch) + timeAt(costs.layers[i]!.backward, batch);
  for (let i = 0; i < costs.layers.length; i++) if (i < plan.begin || i >= plan.end) compute += at(i, rows);
  for (const p of plan.layers) {
    const c = costs.layers[p.index]!,
      name = c.name,
      input = size(c.inputShape),
      needsInputGrad = p.index > 0;
    if (p.kind === 'elementwise') {
      compute += at(p.index, p.form === 'full' ? totalRows : rows);
      continue;
    }
    compute += at(p.index, rows);
    if (p.kind === 'column') {
      splitParams += c.paramFloats;
      if (p.inputRows)
        exchanges.push({ what: `${name}: gather the section's input rows`, op: 'allgather', floats: padded * input });
      if (p.gatherOutput)
        exchanges.push({
          what: `${name}: gather the output units`,
          op: 'allgather',
          floats: totalRows * Math.ceil(p.spec.units / G) * G,
        });
      if (needsInputGrad) {
        exchanges.push(
          p.inputRows
            ? {
                what: `${name}: backward, input gradients back to their rows`,
                op: 'reduceScatter',
                floats: padded * input,
              }
            : {
                what: `${name}: backward, sum of the partial input gradients`,
                op: 'allreduce',
                floats: totalRows * input,
              },
        );
      }
    } else if (p.kind === 'row') {
      splitParams += c.paramFloats;
      const units = p.spec.units;
      exchanges.push(
        p.scatterRows
          ? { what: `${name}: partial sums to the rows' devices`, op: 'reduceScatter', floats: padded * units }
          : { what: `${name}: sum of the partial products`, op: 'allreduce', floats: totalRows * units },
      );
      if (p.scatterRows)
        exchanges.push({
          what: `${name}: backward, gather the output gradients`,
          op: 'allgather',
          floats: padded * units,
        });
    } else if (p.kind === 'channel') {
      splitParams += c.paramFloats;
      const [oh, ow] = c.outputShape as [number, number, number];
      if (p.inputRows)
        exchanges.push({ what: `${name}: gather the input images`, op: 'allgather', floats: padded * input });
      exchanges.push({
        what: `${name}: gather the output channels`,
        op: 'allgather',
        floats: totalRows * oh * ow * Math.ceil(p.spec.filters / G) * G,
      });
      if (needsInputGrad)
        exchanges.push({
          what: `${name}: backward, sum of the partial input gradients`,
          op: 'allreduce',
          floats: totalRows * input,
        });
    } else if (p.kind === 'transformer') {
      // Megatron's block: the attention's and the MLP's partial outputs all-reduced forward, their input gradients backward
      splitParams += c.paramFloats;
      if (p.inputRows)
        exchanges.push({ what: `${name}: gather the input sequences`, op: 'allgather', floats: padded * input });
      for (const what of [
        'attention output',
        'MLP output',
        'backward, MLP input gradient',
        'backward, attention input gradient',
      ])
        exchanges.push({ what: `${name}: sum of the partial ${what}`, op: 'allreduce', floats: totalRows * input });
    } else {
      const tiles = p.spec.tiles[0] * p.spec.tiles[1];
      if (p.inputRows)
        exchanges.push({ what: `${name}: gather the input images`, op: 'allgather', floats: padded * input });
      exchanges.push({
        what: `${name}: gather the output tiles`,
        op: 'allgather',
        floats: Math.ceil((totalRows * c.outputElements * Math.ceil(tiles / G)) / tiles) * G,
      });
      if (needsInputGrad)
        exchanges.push({
          what: `${name}: backward, sum of the input gradients`,
          op: 'allreduce',
          floats: totalRows * input,
        });
    }
  }
  if (plan.sliceRowsAtEnd) {
    const last = costs.layers[plan.end - 1]!;
    exchanges.push({
      what: 'section exit: backward, gather the output gradients',
      op: 'allgather',
      floats: padded * last.outputElements,
    });
  }
  return {
    feasible: true,
    exchanges,
    compute,
    replicatedFloats: costs.paramFloats - splitParams,
    shardFloats: shardLayout(plan, 0).length,
    plan,
  };
}
