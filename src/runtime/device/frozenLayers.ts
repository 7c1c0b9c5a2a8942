/**
 * Frozen layers (`train.initFrom.freeze`): their weights stay bit for bit as the run started them,
 * under every strategy. The optimizers, the device's and a parameter server's, leave their ranges
 * alone (createOptimizer's `frozen`); clipping leaves their gradient out of the norm; and a strategy
 * that averages weights (bsp, bmuf, diloco, easgd), whose mean of G identical floats need not give the float
 * back when G is not a power of two, has them put back after every step it may have moved them.
 */
import type { FlatRange } from '../../optim/optimizer.ts';
import type { RunConfig } from '../../config/runConfig.ts';
import type { Strategy } from '../../parallel/strategy.ts';
import type { TrainableModel } from '../../nn/trainableModel.ts';
import type { Sequential } from '../../nn/model.ts';
import { ModelParallelNet } from '../../parallel/modelParallel/net.ts';
import { layerOfTensor } from '../checkpoint/initFromPlan.ts';

/** A named tensor's place in a flat buffer. */
interface Entry {
  name: string;
  offset: number;
  size: number;
}

/** The parameter entries of a device's model: the whole model's, or a split model's replicated layers and its shards. */
export function paramEntriesOf(model: TrainableModel): readonly Entry[] {
  return model instanceof ModelParallelNet
    ? [...model.replicatedEntries, ...model.shardEntries]
    : (model as unknown as Sequential).paramEntries;
}

/** The ranges of `entries` (named 'layers.N.kernel', …) that belong to the layers train.initFrom.freeze names. */
export function frozenRanges(config: RunConfig, entries: readonly Entry[]): FlatRange[] {
  const frozen = new Set(config.train.initFrom?.freeze ?? []);
  if (frozen.size === 0) return [];
  return entries
    .filter((e) => frozen.has(layerOfTensor(e.name) ?? ''))
    .map((e) => ({ start: e.offset, end: e.offset + e.size }));
}

/**
 * `strategy`, with the frozen ranges of the replica's weights put back after each of its hooks
 * that may move them (the after-step averaging, the final consolidation), and in the job's model
 * it reports. The values are taken at the first step, once the start (or the resumed state) is in
 * place. A strategy without such hooks is returned as it is.
 */
export function keepFrozen(strategy: Strategy, ranges: readonly FlatRange[]): Strategy {
  const { afterStep, onFinish, modelParams } = strategy;
  if (ranges.length === 0 || !(afterStep || onFinish || modelParams)) return strategy;
  let kept: { start: number; values: Float32Array }[] | null = null;
  const putBack = (params: Float32Array) => {
    for (const k of kept ?? []) params.set(k.values, k.start);
  };
  return {
    ...strategy,
    async beforeStep(replica, info) {
      await strategy.beforeStep?.(replica, info);
      // a split model's shards are the optimizer's alone: only the replicated part is averaged
      kept ??= ranges
        .filter((r) => r.end <= replica.params.length)
        .map((r) => ({ start: r.start, values: replica.params.slice(r.start, r.end) }));
    },
    ...(afterStep && {
      async afterStep(replica, info) {
        await afterStep(replica, info);
        putBack(replica.params);
      },
    }),
    ...(onFinish && {
      async onFinish(replica) {
        await onFinish(replica);
        putBack(replica.params);
      },
    }),
    ...(modelParams && {
      async modelParams(replica) {
        const params = await modelParams(replica);
        if (!kept) return params;
        const copy = params.slice();
        putBack(copy);
        return copy;
      },
    }),
  };
}
