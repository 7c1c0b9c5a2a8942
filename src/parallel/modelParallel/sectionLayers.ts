import type { Communicator } from '../../comm/communicator.ts';
import type { Backend } from '../../kernels/backend.ts';
import type { Layer } from '../../nn/layer.ts';
import type { LayerSlot } from '../../nn/flatLayout.ts';
import { buildLayer } from '../../nn/buildLayer.ts';
import { Dropout } from '../../nn/dropout.ts';
import type { SerialSpatialStack } from '../../nn/spatialStack.ts';
import type { ModelParallelPlan, PlannedLayer } from './plan.ts';
import { ColumnParallelDense, RowParallelDense } from './tensorParallel.ts';
import { ChannelParallelConv } from './channelParallelConv.ts';
import { SpatialParallelStage } from './spatialParallelStage.ts';
import { SectionElementwise } from './sectionElementwise.ts';
import { SliceRows } from './sliceRows.ts';
import { TensorParallelBlock } from './tensorParallelBlock.ts';

/** A layer of the section, named in the flat layout by its unsplit layer's index; `shard` when its weights are this device's own. */
export interface SectionSlot extends LayerSlot {
  shard: boolean;
}

/**
 * The layers of the model-parallel section on this device, in order: tensor-parallel dense
 * (column, row), Megatron-split transformer blocks, channel-parallel conv2d and elementwise layers,
 * a spatial stage per parallel spatialSplit (its weights replicated: it wraps the unsplit model's serial layer `unsplit[i]`),
 * and the exit to this device's rows when the section ends with every device's samples.
 */
export function buildSectionLayers(
  backend: Backend,
  comm: Communicator,
  plan: ModelParallelPlan,
  unsplit: readonly Layer[],
): SectionSlot[] {
  // the shards' weight gradients see every device's samples, each carrying the data-parallel G/(G·b) scale
  const weightGradScale = 1 / comm.size;
  const slots: SectionSlot[] = [];
  const ranges = new Map<number, { start: number; end: number }>();
  for (const p of plan.layers) {
    const name = `model.layers[${p.index}] ${p.spec.type}`;
    let layer: Layer,
      shard = true;
    if (p.kind === 'column') {
      const { units, activation, useBias } = p.spec;
      const column = new ColumnParallelDense(backend, comm, name, p.inFeatures, units, activation, useBias, {
        inputRows: p.inputRows,
        gatherOutput: p.gatherOutput,
        weightGradScale,
      });
      ranges.set(p.index, { start: column.start, end: column.end });
      layer = column;
    } else if (p.kind === 'transformer') {
      layer = new TensorParallelBlock(backend, comm, name, p, unsplit[p.index]!, weightGradScale);
    } else if (p.kind === 'channel') {
      layer = new ChannelParallelConv(backend, comm, name, p.spec, p.inputShape, {
        inputRows: p.inputRows,
        weightGradScale,
      });
    } else if (p.kind === 'spatial') {
      layer = new SpatialParallelStage(
        backend,
        comm,
        name,
        unsplit[p.index] as SerialSpatialStack,
        p.spec.tiles,
        p.inputShape,
        { inputRows: p.inputRows },
      );
      shard = false;
    } else if (p.kind === 'row') {
      const { units, activation, useBias } = p.spec;
      layer = new RowParallelDense(backend, comm, name, p.inFeatures, units, activation, useBias, {
        scatterRows: p.scatterRows,
        weightGradScale,
      });
    } else {
      layer = new SectionElementwise(elementwiseLayer(backend, p, ranges), comm.rank, comm.size);
      shard = false;
    }
    slots.push({ index: p.index, layer, shard });
  }
  if (plan.sliceRowsAtEnd) {
    const out = unsplit[plan.end - 1]!.outputShape;
    slots.push({
      index: plan.end,
      layer: new SliceRows(comm, backend, plan.frames ? out.slice(1) : out),
      shard: false,
    });
  }
  return slots;
}

/** The nn layer for an elementwise step, built for the width it sees (a shard's, when split). */
function elementwiseLayer(
  backend: Backend,
  p: Extract<PlannedLayer, { kind: 'elementwise' }>,
  ranges: Map<number, { start: number; end: number }>,
): Layer {
  // the section computes on the job's whole batch, not a replica's: dropout there is keyed by
  // global sample index (and, on a shard, by the feature's index in the unsplit layer)
  if (p.spec.type === 'dropout') {
    const range = p.form === 'shard' ? ranges.get(p.shardOf!)! : { start: 0, end: p.features };
    return new Dropout(
      backend,
      `model.layers[${p.index}] dropout`,
      p.form === 'shard' ? [range.end - range.start] : p.inputShape,
      p.spec.rate,
      p.index,
      'per-sample',
      { offset: range.start, total: p.features },
    );
  }
  if (p.form !== 'shard') return buildLayer(backend, p.spec, p.index, p.inputShape);
  const range = ranges.get(p.shardOf!)!;
  return buildLayer(backend, p.spec, p.index, [range.end - range.start]);
}
