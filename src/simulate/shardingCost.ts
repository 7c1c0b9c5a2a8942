/**
 * hybrid with ZeRO sharding (`hybrid:shard=1|2|3`) as sharding/shardedHybrid.ts runs it:
 *
 *   stage 1: hybrid's buckets all-reduced (the same overlap with backward), the optimizer on this
 *     device's slice of the whole buffer (ownedSlice(Ψ, N, rank)), one all-gather of the weights.
 *   stage 2: each bucket reduce-scattered instead (as backward finishes it, like hybrid's
 *     all-reduces), a one-float all-reduce agreeing on a NaN/Inf step (a device sees only its parts),
 *     the optimizer on this device's part of every bucket, one all-gather per bucket. A device holds
 *     the whole weights, its part of the gradient and one bucket's gradient workspace
 *     (gradientShards.ts), which backward waits on each reduce-scatter to reuse: 'implemented'
 *     runs them in line with compute, 'ideal' overlaps them with backward as hybrid's all-reduces.
 *   stage 3: the same buckets as units (weightShards.ts; a dense layer above rowBlockBytes, each of
 *     its row blocks), each all-gathered before its forward and
 *     again before its backward, reduce-scattered right after its backward, each waited for where
 *     it is called (no prefetch, no overlap), the NaN flag, the optimizer on the owned part; no
 *     all-gather after the update. A device holds its parts and one unit's weights and gradients.
 *
 * The hierarchical communicator (several devices per process on several hosts) has no two-level
 * reduce-scatter or all-gather: each is a whole all-reduce there (costModel.ts), as in paratrain.
 */
import { allgather, allreduce, reduceScatter, type Network, type Placement } from './costModel.ts';
import { hybridPlan, type LockstepPlan, type Overlap } from './lockstep.ts';
import { computeTime, type ModelCosts } from './layerCosts.ts';
import { gradientBuckets } from '../parallel/sharding/shardLayout.ts';
import { planRowBlocks, splitPieces } from '../parallel/sharding/rowBlocks.ts';
import type { ShardStage } from '../parallel/sharding/shardedHybrid.ts';
import type { FlatRange } from '../optim/optimizer.ts';
import { deviceMemoryBytes, largestOwnedFloats } from './memory.ts';
import type { ModelWeights } from './weights.ts';

/**
 * The pieces a stage's layout cuts the buffer into: stage 1 the whole buffer, stages 2 and 3
 * hybrid's buckets (shardLayout.ts), at stage 3 with the dense layers above `rowBlockBytes` cut into
 * their row blocks (rowBlocks.ts).
 */
export function shardPieces(
  stage: ShardStage,
  size: number,
  weights: ModelWeights,
  bucketBytes: number,
  rowBlockBytes = 0,
): FlatRange[] {
  if (stage === 1) return size > 0 ? [{ start: 0, end: size }] : [];
  const buckets = gradientBuckets(size, weights.readyOffsets, Math.max(1, Math.floor(bucketBytes / 4)));
  const splits = weights.layerSplits;
  if (stage !== 3 || !(rowBlockBytes > 0) || !splits) return buckets;
  const plans = planRowBlocks(
    { layers: splits, layerParamRange: (i) => splits[i]!.range, rowSplit: (i) => splits[i]!.split },
    Math.floor(rowBlockBytes / 4),
  );
  return splitPieces(buckets, plans);
}

/** One step of sharded hybrid on G = hosts × perHost devices, and the memory each device holds. */
export function shardedPlan(
  costs: ModelCosts,
  weights: ModelWeights,
  batch: number,
  bucketBytes: number,
  stage: ShardStage,
  p: Placement,
  net: Network,
  overlap: Overlap,
  rowBlockBytes = 0,
): { plan: LockstepPlan; memoryBytes: number } {
  const G = p.hosts * p.perHost;
  const pieces = shardPieces(stage, costs.paramFloats, weights, bucketBytes, rowBlockBytes);
  const owned = largestOwnedFloats(costs.paramFloats, pieces, G);
  if (stage === 3) return weightShardedPlan(costs, weights, batch, pieces, owned, p, net);
  const reduced = hybridPlan(costs, batch, bucketBytes, p, net, overlap, {
    ...(stage === 2 ? { bucket: (n: number) => reduceScatter(n, p, net) } : {}),
    update: costs.optimizerPerFloat * owned,
  });
  const after = [
    ...(stage === 2 ? [allreduce(4, p, net)] : []),
    ...pieces.map((r) => allgather((r.end - r.start) * 4, p, net)),
  ];
  const seconds = after.reduce((s, c) => s + c.seconds, 0);
  const largest = Math.max(0, ...pieces.map((r) => r.end - r.start));
  // stage 2 as implemented: backward waits on each reduce-scatter (one gradient workspace)
  const inLine =
    stage === 2 && overlap === 'implemented'
      ? pieces.reduce((s, r) => s + reduceScatter((r.end - r.start) * 4, p, net).seconds, 0) +
        costs.optimizerPerFloat * owned
      : null;
  return {
    plan: {
      compute: reduced.compute,
      bytes: reduced.bytes + after.reduce((s, c) => s + c.bytes, 0),
      tail: (f) => (inLine ?? reduced.tail(f)) + seconds,
    },
    // stage 2: its part of the gradient and one bucket's workspace (stage 1: the whole gradient)
    memoryBytes: deviceMemoryBytes({
      paramFloats: costs.paramFloats,
      ...(stage === 2 ? { gradFloats: owned + largest } : {}),
      stateFloats: costs.stateFloats,
      optimizerSlots: weights.optimizerSlots,
      ownedFloats: owned,
    }),
  };
}

/** Stage 3: every unit's two all-gathers and reduce-scatter in line with compute, then the flag and the owned update. */
function weightShardedPlan(
  costs: ModelCosts,
  weights: ModelWeights,
  batch: number,
  pieces: readonly FlatRange[],
  owned: number,
  p: Placement,
  net: Network,
): { plan: LockstepPlan; memoryBytes: number } {
  const calls = pieces.flatMap((r) => {
    const n = (r.end - r.start) * 4;
    return [allgather(n, p, net), allgather(n, p, net), reduceScatter(n, p, net)];
  });
  calls.push(allreduce(4, p, net));
  const seconds = calls.reduce((s, c) => s + c.seconds, 0) + costs.optimizerPerFloat * owned;
  const largest = Math.max(0, ...pieces.map((r) => r.end - r.start));
  return {
    plan: {
      compute: computeTime(costs, batch),
      bytes: calls.reduce((s, c) => s + c.bytes, 0),
      tail: () => seconds,
    },
    // its parts of the weights and gradients and one gathered unit of each, its part of the optimizer state
    memoryBytes: deviceMemoryBytes({
      paramFloats: owned + largest,
      stateFloats: costs.stateFloats,
      optimizerSlots: weights.optimizerSlots,
      ownedFloats: owned,
    }),
  };
}
