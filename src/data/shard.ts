import { CounterRng } from '../tensor/rng.ts';
import { rankSlice } from './sampler.ts';

/**
 * Disjoint per-worker shards, for strategies whose workers each own their data and step at their own
 * pace (asynchronous SGD, Downpour, EASGD): a worker walks only its shard, so workers may run out of
 * data at different times. For lockstep strategies use GlobalBatchSampler instead.
 */

/** Salts that separate these streams from the other streams keyed by the same seed. */
const SHARD_STREAM = 0x54a4d;
const SHARD_SHUFFLE_STREAM = 0x54a4e;

/**
 * The sample indices that `rank` owns: a fixed seeded permutation of [0, count) cut into worldSize
 * contiguous parts whose sizes differ by at most 1 (lower ranks get the extra). The shards of all
 * ranks are disjoint and together cover every sample. Sorted, so reads go through memory in order.
 */
export function shardByRank(count: number, worldSize: number, rank: number, seed: number): Int32Array {
  if (!Number.isInteger(count) || count < 0) throw new Error(`shardByRank: count must be a whole number ≥ 0, got ${count}`);
  if (!Number.isInteger(worldSize) || worldSize < 1) throw new Error(`shardByRank: worldSize must be a whole number ≥ 1, got ${worldSize}`);
  if (!Number.isInteger(rank) || rank < 0 || rank >= worldSize) throw new Error(`shardByRank: rank ${rank} is not in 0..${worldSize - 1}`);
  const order = new Int32Array(count);
  for (let i = 0; i < count; i++) order[i] = i;
  // a permutation, not contiguous blocks of the file: files are often ordered (by class, by source)
  new CounterRng(seed, SHARD_STREAM).shuffle(order);
  const { start, end } = rankSlice(count, worldSize, rank);
  return order.slice(start, end).sort();
}

export interface ShardSamplerOptions {
  count: number;
  /** PER-WORKER batch size */
  batchSize: number;
  worldSize: number;
  rank: number;
  seed: number;
  shuffle: boolean;
  dropLast: boolean;
}

export interface ShardBatch {
  step: number;
  /** dataset indices of this worker's batch; a view: read, don't modify */
  indices: Int32Array;
}

/** Batches from this worker's own shard; the number of steps per epoch may differ between workers. */
export class ShardSampler {
  readonly shard: Int32Array;
  readonly options: Readonly<ShardSamplerOptions>;

  constructor(options: ShardSamplerOptions) {
    if (!Number.isInteger(options.batchSize) || options.batchSize < 1) {
      throw new Error(`ShardSampler: batchSize must be a whole number ≥ 1, got ${options.batchSize}`);
    }
    this.options = { ...options };
    this.shard = shardByRank(options.count, options.worldSize, options.rank, options.seed);
  }

  stepsPerEpoch(): number {
    const n = this.shard.length, b = this.options.batchSize;
    return this.options.dropLast ? Math.floor(n / b) : Math.ceil(n / b);
  }

  *epoch(epoch: number): Generator<ShardBatch> {
    const { batchSize, seed, rank, shuffle } = this.options;
    const order = this.shard.slice();
    if (shuffle) new CounterRng(seed, epoch, rank, SHARD_SHUFFLE_STREAM).shuffle(order);
    const steps = this.stepsPerEpoch();
    for (let step = 0; step < steps; step++) {
      yield { step, indices: order.subarray(step * batchSize, Math.min((step + 1) * batchSize, order.length)) };
    }
  }
}
