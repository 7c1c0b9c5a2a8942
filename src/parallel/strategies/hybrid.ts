import type { Communicator } from '../../comm/communicator.ts';
import type { Strategy } from '../strategy.ts';
import { registerAndBroadcast } from '../replicaSync.ts';
import { BucketsInFlight } from '../bucketsInFlight.ts';
import { allFinite, anyBad } from '../nonFinite.ts';
import type { StrategyEntry } from './entry.ts';
import { shardedHybridStrategy, type ShardStage } from '../sharding/shardedHybrid.ts';
import { compressedHybridStrategy } from '../compression/compressedHybrid.ts';
import { compressionSchema, type CompressionSpec } from '../compression/spec.ts';

/**
 * Hybrid (synchronous data parallelism): every device computes a gradient on its own slice of the
 * global batch, the mean of all is applied by every replica's identical optimizer — exactly one
 * device with the global batch, up to floating-point summation order.
 *
 * Gradients are reduced in buckets of about `bucketBytes`, from the last layers backwards, each
 * as soon as backward has finished it; what remains is reduced after backward. Over a transport
 * whose calls progress in the event loop (TCP and MPI, and the hierarchical allreduce over TCP:
 * comm/overlap.ts) the buckets overlap backward: while one is in flight, backward yields a
 * turn of the event loop after every layer with parameters (socket reads and writes, the ring's
 * steps; MPI_Test), and the transport is told it computes (no call holds the thread meanwhile).
 * Shared memory reduces each bucket inline, blocking, as soon as it is ready. Either way the same
 * buckets are summed in the same order: the same bits.
 *
 * Non-finite numbers travel with the gradients: the bucket that reaches offset 0 is always reduced
 * in applyUpdate, where a device whose loss — or gradient of its shards of `parallel: model`
 * layers, which are never reduced — is NaN/Inf sets grads[0] to NaN first; a NaN or Inf
 * anywhere makes the sum non-finite on every device alike, so one pass over the reduced gradient
 * decides, identically everywhere, to skip the step (no optimizer update). train.clipGradNorm
 * clips the reduced (finite) gradient.
 */
export function hybridStrategy(comm: Communicator, bucketBytes: number): Strategy {
  const bucketFloats = Math.max(1, Math.floor(bucketBytes / 4));
  /** grads[reducedFrom:] are being reduced this step; −1 before the first bucket of a step */
  let reducedFrom = -1;
  const buckets = new BucketsInFlight(comm);
  const flag = new Float32Array(1);
  return {
    name: 'hybrid',
    onStart: (replica) => registerAndBroadcast(comm, replica),
    onGradientsReady(replica, offset) {
      if (reducedFrom < 0) reducedFrom = replica.grads.length;
      // the first bucket waits for applyUpdate, which may mark it (see above)
      if (offset !== 0 && reducedFrom - offset >= bucketFloats) {
        buckets.startDuringBackward(replica.grads.subarray(offset, reducedFrom));
        reducedFrom = offset;
      }
      return buckets.turn();
    },
    async applyUpdate(replica, info) {
      buckets.backwardEnded();
      const rest = reducedFrom < 0 ? replica.grads.length : reducedFrom;
      const localBad = info.lossNonFinite === true || info.shardsNonFinite === true;
      if (localBad && rest > 0) replica.grads[0] = NaN;
      if (rest > 0) buckets.startAfterBackward(replica.grads.subarray(0, rest));
      await buckets.finish();
      reducedFrom = -1;
      // a model split entirely (no replicated gradient to carry the flag) agrees on it alone
      const bad =
        replica.grads.length > 0
          ? !allFinite(replica.grads)
          : await anyBad((v) => comm.allreduce(v, 'sum'), flag, localBad);
      if (bad) return { skipped: true };
      // clipping acts on the reduced gradient, so G devices clip exactly as one device would
      await replica.clipGradients?.();
      replica.localStep(info.lr);
    },
    agree: (values) => comm.allreduce(values, 'sum'),
  };
}

export interface HybridSpec {
  type: 'hybrid';
  /** gradients are all-reduced in buckets of about this size as backward produces them */
  bucketBytes: number;
  /** ZeRO sharding (sharding/shardedHybrid.ts): 1 optimizer state, 2 + gradients, 3 + weights; absent, none */
  shard?: ShardStage;
  /** stage 3: a dense layer of more bytes is gathered a block of kernel rows (of at most this size) at a time; absent: whole */
  rowBlockBytes?: number;
  /** gradients sent compressed, with error feedback (compression/compressedHybrid.ts); absent: plain floats */
  compression?: CompressionSpec;
}

export const hybridEntry: StrategyEntry<HybridSpec> = {
  name: 'hybrid',
  schema: (f) =>
    f
      .options({
        bucketBytes: f.posInt().default(4 * 1024 * 1024),
        shard: f.nonNegInt().default(0),
        rowBlockBytes: f.posInt().optional(),
        compression: compressionSchema(f).optional(),
      })
      .refine((o) => o.shard <= 3, {
        path: ['shard'],
        message:
          'a ZeRO stage: use 1 (optimizer state), 2 (+ gradients), 3 (+ weights, gathered layer by layer) or 0 (none)',
      })
      .refine((o) => o.rowBlockBytes === undefined || o.shard === 3, {
        path: ['rowBlockBytes'],
        message:
          'gathering a layer in row blocks is stage 3 (sharded weights): add shard: 3, or leave out rowBlockBytes',
        params: { noGot: true },
      })
      .refine((o) => !(o.compression && o.shard > 0), {
        path: ['compression'],
        message: 'compression and shard cannot be combined yet; leave out one of them (shard: 0 or no compression)',
        params: { noGot: true },
      })
      .transform(
        (o): HybridSpec => ({
          type: 'hybrid',
          bucketBytes: o.bucketBytes,
          ...(o.shard > 0 ? { shard: o.shard as ShardStage } : {}),
          ...(o.rowBlockBytes !== undefined ? { rowBlockBytes: o.rowBlockBytes } : {}),
          ...(o.compression ? { compression: o.compression } : {}),
        }),
      ),
  needsParameterServer: () => false,
  lockstep: true,
  modelParallel: true,
  create: (spec, { comm, seed }) =>
    spec.shard
      ? shardedHybridStrategy(comm, spec.bucketBytes, spec.shard, spec.rowBlockBytes)
      : spec.compression
        ? compressedHybridStrategy(comm, hybridStrategy(comm, spec.bucketBytes), spec.compression, seed ?? 0)
        : hybridStrategy(comm, spec.bucketBytes),
};
