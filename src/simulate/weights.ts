/**
 * What the simulator needs of a model's weights beyond its layers' times: the weight tensors of the
 * flat buffer (their shapes decide what gradient compression sends), where backward reports
 * gradients final (ZeRO stage 2's buckets are hybrid's), each layer's trainable values (the
 * pipeline's partition) and the optimizer's state per parameter. Read from the model as paratrain
 * builds it; nothing is timed.
 */
import { getBackend } from '../kernels/index.ts';
import { buildModel } from '../nn/model.ts';
import type { ModelSpec } from '../nn/spec.ts';
import type { OptimizerSpec } from '../optim/spec.ts';
import { optimizerStateSize, type FlatRange } from '../optim/optimizer.ts';
import type { RowSplit } from '../parallel/sharding/rowBlocks.ts';
import type { ParamTensor } from '../parallel/strategy.ts';
import { parameterCosts } from '../parallel/pipeline/partition.ts';

/** A model's weights as the strategies see them. */
export interface ModelWeights {
  /** the flat buffer's tensors (name, shape, offset), as a replica's `tensors` lists them */
  tensors: ParamTensor[];
  /** offsets below which the gradient is final, in the order backward reports them */
  readyOffsets: number[];
  /** per layer, its trainable values (partition.ts's default cost) */
  layerParams: number[];
  /** the optimizer's state floats per parameter (Adam 2, SGD with momentum 1, plain SGD 0) */
  optimizerSlots: number;
  optimizer: OptimizerSpec;
  /** per layer, its parameters' range and how it runs in row blocks (ZeRO stage 3's rowBlockBytes); absent: none can */
  layerSplits?: { range: FlatRange | null; split: RowSplit | null }[];
}

/** Builds the model (no timing) and reads its weights' layout. */
export async function describeWeights(
  model: ModelSpec,
  optimizer: OptimizerSpec,
  backend: string,
): Promise<ModelWeights> {
  const built = buildModel(await getBackend(backend), model);
  return {
    tensors: built.paramEntries.map((e) => ({ name: e.name, shape: [...e.shape], offset: e.offset })),
    readyOffsets: [...built.gradientReadyOffsets],
    layerParams: parameterCosts(built.layers),
    optimizerSlots: optimizerStateSize(optimizer, 1),
    optimizer,
    layerSplits: built.layers.map((_, i) => ({ range: built.layerParamRange(i), split: built.rowSplit(i) })),
  };
}
