import { CounterRng } from '../tensor/rng.ts';
import { evenSlice } from '../tensor/shape.ts';

/**
 * The sampler that makes data parallelism exact. Every rank computes the same per-epoch permutation
 * (keyed by seed and epoch, never by rank), cuts it into global batches, and takes its own contiguous
 * slice of each. Concatenating the ranks' slices in rank order gives back the global batch, so G ranks
 * with a global batch of B see exactly the samples one rank with batch B sees, in the same order.
 */

export interface GlobalBatchSamplerOptions {
  /** number of samples in the dataset */
  count: number;
  /** GLOBAL batch size: samples per step summed over all ranks */
  batchSize: number;
  worldSize: number;
  rank: number;
  seed: number;
  /** permute each epoch (false: samples in file order) */
  shuffle: boolean;
  /** drop the last global batch when it is short (otherwise it is a smaller step) */
  dropLast: boolean;
}

export interface RankBatch {
  /** step within the epoch */
  step: number;
  /** this rank's sample indices; a view into the epoch's permutation: read, don't modify */
  indices: Int32Array;
  /** position of indices[0] in the epoch's permutation: the global sample position, for keyed random draws */
  globalOffset: number;
  /** samples in this step over all ranks (smaller than batchSize on a short last batch) */
  globalBatchSize: number;
}

/** Salt that separates the data-order stream from the other streams keyed by the same seed. */
const SHUFFLE_STREAM = 0xda7a;

function checkWhole(what: string, value: number, min: number): void {
  if (!Number.isInteger(value) || value < min)
    throw new Error(`GlobalBatchSampler: ${what} must be a whole number ≥ ${min}, got ${value}`);
}

export class GlobalBatchSampler {
  readonly options: Readonly<GlobalBatchSamplerOptions>;

  constructor(options: GlobalBatchSamplerOptions) {
    const { count, batchSize, worldSize, rank, seed, dropLast } = options;
    checkWhole('count', count, 0);
    checkWhole('batchSize', batchSize, 1);
    checkWhole('worldSize', worldSize, 1);
    if (!Number.isInteger(rank) || rank < 0 || rank >= worldSize) {
      throw new Error(`GlobalBatchSampler: rank ${rank} is not in 0..${worldSize - 1} for a world of ${worldSize}`);
    }
    if (!Number.isFinite(seed)) throw new Error(`GlobalBatchSampler: seed must be a number, got ${seed}`);
    if (batchSize < worldSize) {
      throw new Error(
        `global batch size ${batchSize} is smaller than the ${worldSize} devices: each device needs at least one sample per step; use a batch size of at least ${worldSize} or fewer devices`,
      );
    }
    if (dropLast && count > 0 && count < batchSize) {
      throw new Error(
        `the dataset has ${count} samples, fewer than one global batch of ${batchSize}, so dropping the short last batch leaves no steps; use a smaller batch size or keep the last batch`,
      );
    }
    this.options = { ...options };
  }

  stepsPerEpoch(): number {
    const { count, batchSize, dropLast } = this.options;
    return dropLast ? Math.floor(count / batchSize) : Math.ceil(count / batchSize);
  }

  /** The order of the samples in epoch `epoch`; the same on every rank. */
  permutation(epoch: number): Int32Array {
    const { count, seed, shuffle } = this.options;
    const order = new Int32Array(count);
    for (let i = 0; i < count; i++) order[i] = i;
    if (shuffle) new CounterRng(seed, epoch, SHUFFLE_STREAM).shuffle(order);
    return order;
  }

  /**
   * This rank's batches of epoch `epoch`. Every rank yields the same number of steps (a rank may get
   * an empty slice on a short last batch) so that collectives stay in lockstep.
   */
  *epoch(epoch: number): Generator<RankBatch> {
    const { count, batchSize, worldSize, rank } = this.options;
    const order = this.permutation(epoch);
    const steps = this.stepsPerEpoch();
    for (let step = 0; step < steps; step++) {
      const batchStart = step * batchSize;
      const globalBatchSize = Math.min(batchSize, count - batchStart);
      // as even as possible, lower ranks get the extra sample
      const { start, end } = evenSlice(globalBatchSize, worldSize, rank);
      yield {
        step,
        indices: order.subarray(batchStart + start, batchStart + end),
        globalOffset: batchStart + start,
        globalBatchSize,
      };
    }
  }
}
