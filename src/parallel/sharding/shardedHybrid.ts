/**
 * Hybrid with ZeRO sharding (Rajbhandari et al. 2020, "ZeRO: Memory Optimizations Toward Training
 * Trillion Parameter Models"): synchronous data parallelism whose optimizer state is split over the
 * devices, each device owning a part of the flat buffer (ShardLayout) and updating only that part.
 *
 * - stage 1 (P_os): gradients are all-reduced as hybrid does (the same buckets, the same sums);
 *   each device keeps optimizer state for its slice ownedSlice(Ψ, N, rank), steps those weights,
 *   and the weights are all-gathered. Equal to hybrid bit for bit (elementwise optimizer on the same
 *   reduced gradient).
 * - stage 2 (P_os+g): each of hybrid's buckets is reduce-scattered instead (half an all-reduce's
 *   traffic); a device owns its part of every bucket, so its reduced gradient and its optimizer
 *   state are those parts; then as stage 1, one all-gather per bucket. The flat gradient buffer
 *   backward accumulates into stays whole (the layers write into it), so the memory saved is the
 *   optimizer state's, as in stage 1.
 *
 * A device sees only its part of the reduced gradient in stage 2, so a NaN/Inf there (or a device's
 * non-finite loss) is agreed on explicitly: one flag summed over the devices, and every device skips
 * alike. train.clipGradNorm takes the global norm from the parts: each device's Σ g² over its part,
 * summed over the devices in float64 (stage 1 clips the whole reduced gradient, as hybrid).
 */
import type { Communicator } from '../../comm/communicator.ts';
import type { FlatRange } from '../../optim/optimizer.ts';
import type { ReplicaView, Strategy } from '../strategy.ts';
import { registerAndBroadcast } from '../replicaSync.ts';
import { allFinite, anyBad } from '../nonFinite.ts';
import { gradientBuckets, ShardLayout } from './shardLayout.ts';

/** ZeRO's stages this strategy implements: 1 optimizer state, 2 + gradients. */
export type ShardStage = 1 | 2;

/**
 * Σ of `x` over the devices, in float64: each device's value travels as two float32s (its rounding
 * and the remainder), all-gathered, and every device adds them in rank order, so all agree exactly.
 */
export async function sumOverDevices(comm: Communicator, x: number): Promise<number> {
  const buf = new Float32Array(2 * comm.size);
  const hi = Math.fround(x);
  buf[2 * comm.rank] = hi;
  buf[2 * comm.rank + 1] = x - hi;
  await comm.allgather(buf);
  let sum = 0;
  for (let r = 0; r < comm.size; r++) sum += buf[2 * r]! + buf[2 * r + 1]!;
  return sum;
}

export function shardedHybridStrategy(comm: Communicator, bucketBytes: number, stage: ShardStage): Strategy {
  const bucketFloats = Math.max(1, Math.floor(bucketBytes / 4));
  /** hybrid's buckets in the order they are reduced (the last one starts at 0) */
  let buckets: FlatRange[] = [];
  let layout: ShardLayout | null = null;
  /** buckets whose reduction has started this step */
  let launched = 0;
  let inFlight: Promise<unknown>[] = [];
  const flag = new Float32Array(1);
  const launch = (replica: ReplicaView) => {
    const b = buckets[launched++]!;
    const grads = replica.grads.subarray(b.start, b.end);
    // each rank's gradient is already scaled by worldSize/globalBatch, so the mean is the global mean
    inFlight.push(stage === 1 ? comm.allreduce(grads, 'mean') : comm.reduceScatter(grads, 'mean'));
  };
  return {
    name: 'hybrid',
    async onStart(replica) {
      if (!replica.shardOptimizer)
        throw new Error('train.strategy.hybrid.shard: this replica cannot shard its optimizer; use shard: 0');
      await registerAndBroadcast(comm, replica);
      const size = replica.grads.length;
      buckets = gradientBuckets(size, replica.gradientReadyOffsets ?? [], bucketFloats);
      layout =
        stage === 1
          ? ShardLayout.whole(size, comm.size, comm.rank)
          : new ShardLayout(size, buckets, comm.size, comm.rank);
      replica.shardOptimizer(layout, comm);
    },
    onGradientsReady(replica, offset) {
      // every bucket inside grads[offset:] now; the one reaching 0 waits for applyUpdate (the NaN mark)
      while (launched < buckets.length - 1 && buckets[launched]!.start >= offset) launch(replica);
    },
    async applyUpdate(replica, info) {
      const own = layout!;
      const localBad = info.lossNonFinite === true || info.shardsNonFinite === true;
      // stage 1: the NaN rides the all-reduce to every device, as in hybrid
      if (stage === 1 && localBad && replica.grads.length > 0) replica.grads[0] = NaN;
      while (launched < buckets.length) launch(replica);
      await Promise.all(inFlight);
      inFlight = [];
      launched = 0;
      const parts = own.views(replica.grads);
      const bad =
        stage === 1 && replica.grads.length > 0
          ? !allFinite(replica.grads)
          : await anyBad((v) => comm.allreduce(v, 'sum'), flag, localBad || parts.some((p) => !allFinite(p)));
      if (bad) return { skipped: true };
      if (stage === 1) await replica.clipGradients?.();
      else await replica.clipGradientParts?.(parts, (squares) => sumOverDevices(comm, squares));
      replica.localStep(info.lr);
      await own.allgather(comm, replica.params);
    },
    agree: (values) => comm.allreduce(values, 'sum'),
  };
}
