/**
 * A length-bucketed order of utterances, so a batch holds utterances of similar length and pads little.
 * Per epoch, a pure function of (seed, epoch):
 *
 *   1. the utterances in a random order (Philox keyed by seed, epoch);
 *   2. cut into pools of `poolBatches` global batches; each pool sorted by frame count (stable, so
 *      equal lengths stay in random order) and cut into global batches;
 *   3. the full batches in a random order (a second stream of the same key); a short last batch (when
 *      the count is not a multiple of the batch and dropLast is false) comes last.
 *
 * Without shuffling, the whole set is sorted by length (shortest first) and cut in order, as
 * DeepSpeech orders its training set by size. Each global batch is split across ranks by the rule of
 * sampler.ts (contiguous, as even as possible, lower ranks get the extra sample), so G devices
 * with a global batch of B see exactly the batches one device with batch B sees.
 */
import { GlobalBatchSampler, type RankBatch } from './sampler.ts';
import { CounterRng } from '../tensor/rng.ts';
import { evenSlice } from '../tensor/shape.ts';

export interface BucketSamplerOptions {
  /** frames (or any length) per utterance: what is sorted on */
  lengths: ArrayLike<number>;
  /** GLOBAL batch size: utterances per step summed over all ranks */
  batchSize: number;
  worldSize: number;
  rank: number;
  seed: number;
  /** random pools and batch order each epoch (false: sorted by length, shortest first) */
  shuffle: boolean;
  /** drop the last global batch when it is short */
  dropLast: boolean;
  /** global batches per sorting pool (default 50): larger pools pad less, smaller ones mix lengths more */
  poolBatches?: number;
}

/** Salts that separate these streams from the others keyed by the same seed. */
const POOL_STREAM = 0xb0c7;
const BATCH_STREAM = 0xb0c8;

export class BucketBatchSampler {
  readonly options: Readonly<Required<BucketSamplerOptions>>;
  private readonly steps: number;

  constructor(options: BucketSamplerOptions) {
    const { lengths, batchSize, worldSize, rank, seed, shuffle, dropLast, poolBatches = 50 } = options;
    // the plain sampler's checks (batch vs devices, rank, seed, dropLast on a tiny set) and step count
    this.steps = new GlobalBatchSampler({
      count: lengths.length,
      batchSize,
      worldSize,
      rank,
      seed,
      shuffle,
      dropLast,
    }).stepsPerEpoch();
    if (!Number.isInteger(poolBatches) || poolBatches < 1)
      throw new Error(`BucketBatchSampler: poolBatches must be a whole number ≥ 1, got ${poolBatches}`);
    for (let i = 0; i < lengths.length; i++) {
      if (!Number.isFinite(lengths[i]!)) throw new Error(`BucketBatchSampler: length ${i} is ${lengths[i]}`);
    }
    this.options = { lengths, batchSize, worldSize, rank, seed, shuffle, dropLast, poolBatches };
  }

  stepsPerEpoch(): number {
    return this.steps;
  }

  /** The epoch's order: its global batches concatenated (the same on every rank). */
  permutation(epoch: number): Int32Array {
    const { lengths, batchSize, seed, shuffle, poolBatches } = this.options;
    const count = lengths.length;
    const order = new Int32Array(count);
    for (let i = 0; i < count; i++) order[i] = i;
    const byLength = (a: number, b: number): number => lengths[a]! - lengths[b]!;
    if (!shuffle) {
      // stable: equal lengths stay in file order
      return Int32Array.from(Array.from(order).sort(byLength));
    }
    new CounterRng(seed, epoch, POOL_STREAM).shuffle(order);
    const pool = poolBatches * batchSize;
    for (let start = 0; start < count; start += pool) {
      const sorted = Array.from(order.subarray(start, Math.min(count, start + pool))).sort(byLength);
      order.set(sorted, start);
    }
    // batches (the short one, if any, is the last of the last pool) in a random order, the short one last
    const full = Math.floor(count / batchSize);
    const batchOrder = new Int32Array(full);
    for (let b = 0; b < full; b++) batchOrder[b] = b;
    new CounterRng(seed, epoch, BATCH_STREAM).shuffle(batchOrder);
    const out = new Int32Array(count);
    for (let b = 0; b < full; b++)
      out.set(order.subarray(batchOrder[b]! * batchSize, (batchOrder[b]! + 1) * batchSize), b * batchSize);
    out.set(order.subarray(full * batchSize), full * batchSize);
    return out;
  }

  /** This rank's batches of `epoch`; every rank yields the same number of steps. */
  *epoch(epoch: number): Generator<RankBatch> {
    const { lengths, batchSize, worldSize, rank } = this.options;
    const order = this.permutation(epoch);
    for (let step = 0; step < this.steps; step++) {
      const batchStart = step * batchSize;
      const globalBatchSize = Math.min(batchSize, lengths.length - batchStart);
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
