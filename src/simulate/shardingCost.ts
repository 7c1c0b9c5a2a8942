/**
 * hybrid with ZeRO sharding (`hybrid:shard=1|2`) as sharding/shardedHybrid.ts runs it:
 *
 *   stage 1: hybrid's buckets all-reduced (the same overlap with backward), the optimizer on this
 *     device's slice of the whole buffer (ownedSlice(Ψ, N, rank)), one all-gather of the weights.
 *   stage 2: each bucket reduce-scattered instead (as backward finishes it, like hybrid's
 *     all-reduces), a one-float all-reduce agreeing on a NaN/Inf step (a device sees only its parts),
 *     the optimizer on this device's part of every bucket, one all-gather per bucket.
 *
 * The hierarchical communicator (several devices per process on several hosts) has no two-level
 * reduce-scatter or all-gather: each is a whole all-reduce there (costModel.ts), as in paratrain.
 */
import { allgather, allreduce, reduceScatter, type Network, type Placement } from './costModel.ts';
import { hybridPlan, type LockstepPlan, type Overlap } from './lockstep.ts';
import type { ModelCosts } from './layerCosts.ts';
import { gradientBuckets } from '../parallel/sharding/shardLayout.ts';
import type { ShardStage } from '../parallel/sharding/shardedHybrid.ts';
import type { FlatRange } from '../optim/optimizer.ts';
import { deviceMemoryBytes, largestOwnedFloats } from './memory.ts';
import type { ModelWeights } from './weights.ts';

/** The pieces a stage's layout cuts the buffer into: stage 1 the whole buffer, stage 2 hybrid's buckets (shardLayout.ts). */
export function shardPieces(stage: ShardStage, size: number, weights: ModelWeights, bucketBytes: number): FlatRange[] {
  if (stage === 1) return size > 0 ? [{ start: 0, end: size }] : [];
  return gradientBuckets(size, weights.readyOffsets, Math.max(1, Math.floor(bucketBytes / 4)));
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
): { plan: LockstepPlan; memoryBytes: number } {
  const G = p.hosts * p.perHost;
  const pieces = shardPieces(stage, costs.paramFloats, weights, bucketBytes);
  const owned = largestOwnedFloats(costs.paramFloats, pieces, G);
  const reduced = hybridPlan(costs, batch, bucketBytes, p, net, overlap, {
    ...(stage === 2 ? { bucket: (n: number) => reduceScatter(n, p, net) } : {}),
    update: costs.optimizerPerFloat * owned,
  });
  const after = [
    ...(stage === 2 ? [allreduce(4, p, net)] : []),
    ...pieces.map((r) => allgather((r.end - r.start) * 4, p, net)),
  ];
  const seconds = after.reduce((s, c) => s + c.seconds, 0);
  return {
    plan: {
      compute: reduced.compute,
      bytes: reduced.bytes + after.reduce((s, c) => s + c.bytes, 0),
      tail: (f) => reduced.tail(f) + seconds,
    },
    memoryBytes: deviceMemoryBytes({
      paramFloats: costs.paramFloats,
      stateFloats: costs.stateFloats,
      optimizerSlots: weights.optimizerSlots,
      ownedFloats: owned,
    }),
  };
}
