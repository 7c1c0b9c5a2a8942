/**
 * Hybrid with ZeRO sharding (Rajbhandari et al. 2020, "ZeRO: Memory Optimizations Toward Training
 * Trillion Parameter Models"): synchronous data parallelism whose optimizer state is split over the
 * devices, each device owning a part of the flat buffer (ShardLayout) and updating only that part.
 *
 * - stage 1 (P_os): gradients are all-reduced as hybrid does (the same buckets, overlapping
 *   backward where hybrid's do: bucketsInFlight.ts, the same sums);
 *   each device keeps optimizer state for its slice ownedSlice(Ψ, N, rank), steps those weights,
 *   and the weights are all-gathered. Equal to hybrid bit for bit (elementwise optimizer on the same
 *   reduced gradient).
 * - stage 2 (P_os+g, gradientShards.ts): each of hybrid's buckets is a unit whose gradient the
 *   layers write into a shared workspace, reduce-scattered (half an all-reduce's traffic) right
 *   after the unit's backward; a device keeps only its part of every bucket's reduced gradient
 *   (the whole gradient buffer is dropped at the first step) and optimizer state for those parts;
 *   then as stage 1, one all-gather of the weights per bucket. 4Ψ + 12Ψ/N bytes with Adam, and the
 *   workspace. Equal to hybrid bit for bit with one micro-batch wherever the transport's
 *   reduce-scatter sums in its all-reduce's order (the same sums); with micro-batches each is
 *   reduced separately, equal to float32 rounding (1e-5 relative).
 * - stage 3 (P_os+g+p, weightShards.ts): stage 2's gradient, and the weights sharded too, each
 *   unit's gathered just before use; no all-gather after the update. With `rowBlockBytes` a dense
 *   layer larger than that is gathered a block of kernel rows at a time (rowBlocks.ts).
 *
 * A device sees only its part of the reduced gradient in stages 2 and 3, so a NaN/Inf there (or a
 * device's non-finite loss) is agreed on explicitly: one flag summed over the devices, and every
 * device skips alike. train.clipGradNorm takes the global norm from the parts: every device's nodes
 * of the squares' fixed tree (optim/treeSquares.ts), gathered, give the bits one device's pass over
 * the whole gradient gives (stage 1 clips the whole reduced gradient, as hybrid).
 */
import type { Communicator } from '../../comm/communicator.ts';
import { BucketsInFlight } from '../bucketsInFlight.ts';
import type { FlatRange } from '../../optim/optimizer.ts';
import type { ReplicaView, Strategy } from '../strategy.ts';
import { registerAndBroadcast } from '../replicaSync.ts';
import { allFinite, anyBad } from '../nonFinite.ts';
import { gradientBuckets, ShardLayout } from './shardLayout.ts';
import type { WeightShards } from './weightShards.ts';
import type { GradientShards } from './gradientShards.ts';
import { gatherTreeNodes, nodesBound } from './clipParts.ts';

/** ZeRO's stages this strategy implements: 1 optimizer state, 2 + gradients, 3 + weights. */
export type ShardStage = 1 | 2 | 3;

export function shardedHybridStrategy(
  comm: Communicator,
  bucketBytes: number,
  stage: ShardStage,
  /** stage 3: dense layers above this many bytes gathered a block of kernel rows at a time (0: whole) */
  rowBlockBytes = 0,
): Strategy {
  const bucketFloats = Math.max(1, Math.floor(bucketBytes / 4));
  /** hybrid's buckets in the order they are reduced (the last one starts at 0) */
  let buckets: FlatRange[] = [];
  let layout: ShardLayout | null = null;
  /** stages 2 and 3: this device's part of the gradient (stage 3: and of the weights), reduced during backward */
  let shards: GradientShards | WeightShards | null = null;
  /** stage 1: buckets whose all-reduce has started this step, overlapping backward as hybrid's */
  let launched = 0;
  const inFlight = new BucketsInFlight(comm);
  const flag = new Float32Array(1);
  const grads = (replica: ReplicaView) => {
    const b = buckets[launched++]!;
    return replica.grads.subarray(b.start, b.end);
  };
  return {
    name: 'hybrid',
    async onStart(replica) {
      if (!replica.shardOptimizer)
        throw new Error('train.strategy.hybrid.shard: this replica cannot shard its optimizer; use shard: 0');
      // the whole gradient (stage 3: and weights) is dropped at the first step: not registered
      if (stage === 1) await registerAndBroadcast(comm, replica);
      else await startWhole(comm, replica, stage === 2);
      const size = replica.params.length;
      buckets = gradientBuckets(size, replica.gradientReadyOffsets ?? [], bucketFloats);
      layout =
        stage === 1
          ? ShardLayout.whole(size, comm.size, comm.rank)
          : new ShardLayout(size, buckets, comm.size, comm.rank);
      if (stage === 1) replica.shardOptimizer(layout, comm);
      else {
        if (!(stage === 2 ? replica.shardGradients : replica.shardWeights))
          throw new Error(
            `train.strategy.hybrid.shard ${stage}: this replica cannot shard its gradients; use shard: 1`,
          );
        shards =
          stage === 2
            ? replica.shardGradients!(layout, comm)
            : replica.shardWeights!(layout, comm, Math.floor(rowBlockBytes / 4));
        // stage 3's layout has the split layers' blocks for pieces
        layout = shards.layout;
        await shards.register();
      }
    },
    onGradientsReady(replica, offset) {
      if (shards) return;
      // every bucket inside grads[offset:] now; the one reaching 0 waits for applyUpdate (the NaN mark)
      while (launched < buckets.length - 1 && buckets[launched]!.start >= offset)
        inFlight.startDuringBackward(grads(replica));
      return inFlight.turn();
    },
    async applyUpdate(replica, info) {
      const own = layout!;
      const localBad = info.lossNonFinite === true || info.shardsNonFinite === true;
      if (shards) {
        if (await shardedUpdate(comm, replica, shards, flag, localBad, info.lr)) return { skipped: true };
        // stage 2: every device's stepped parts of the whole weights become every device's
        if (stage === 2) await own.allgather(comm, replica.params);
        return undefined;
      }
      // stage 1: the NaN rides the all-reduce to every device, as in hybrid
      inFlight.backwardEnded();
      if (localBad && replica.grads.length > 0) replica.grads[0] = NaN;
      while (launched < buckets.length) inFlight.startAfterBackward(grads(replica));
      await inFlight.finish();
      launched = 0;
      const bad =
        replica.grads.length > 0
          ? !allFinite(replica.grads)
          : await anyBad((v) => comm.allreduce(v, 'sum'), flag, localBad);
      if (bad) return { skipped: true };
      await replica.clipGradients?.();
      replica.localStep(info.lr);
      await own.allgather(comm, replica.params);
    },
    agree: (values) => comm.allreduce(values, 'sum'),
    ...(stage > 1 && {
      // stage 2: the gradient moves into the workspaces; stage 3: the whole model (a resume's, an evaluation's) gives way to the shards
      beforeStep: async () => shards?.shard(),
      // stage 3: the run ends with the whole model on every device (its model file, its final evaluation)
      onFinish: async () => shards?.unshard(),
    }),
  };
}

/**
 * Rank 0's weights and state on every device, the state (stage 2: and the weights, all-gathered
 * in place each step) registered; the whole gradient buffer is not kept, so not registered.
 */
async function startWhole(comm: Communicator, replica: ReplicaView, keepsWeights: boolean): Promise<void> {
  if (keepsWeights) await comm.register?.(replica.params);
  await comm.register?.(replica.state);
  await comm.broadcast(replica.params, 0);
  await comm.broadcast(replica.state, 0);
}

/**
 * Stages 2 and 3's update: the owned gradient already reduced during backward; agree on NaN/Inf,
 * clip from the parts, step the owned weights. True: the step is skipped.
 */
async function shardedUpdate(
  comm: Communicator,
  replica: ReplicaView,
  shards: GradientShards | WeightShards,
  flag: Float32Array,
  localBad: boolean,
  lr: number,
): Promise<boolean> {
  if (await anyBad((v) => comm.allreduce(v, 'sum'), flag, localBad || !allFinite(shards.ownedGrads))) return true;
  if (replica.clipGradientParts) {
    const { layout } = shards;
    const views = layout.packed(shards.ownedGrads);
    const parts = layout.owned.map((r, k) => ({ values: views[k]!, start: r.start }));
    // the most nodes a device's slices of the pieces decompose into
    const capacity = layout.pieces.reduce((n, p) => n + nodesBound(Math.ceil((p.end - p.start) / layout.worldSize)), 0);
    await replica.clipGradientParts(parts, layout.size, (mine) => gatherTreeNodes(comm, mine, capacity));
  }
  shards.step(lr);
  return false;
}
