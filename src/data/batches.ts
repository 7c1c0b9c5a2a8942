/**
 * A training set's batches as one device draws them: the sampler that cuts every epoch into global
 * batches and gives each rank its slice (the same rule for both), and the gathering of a slice
 * into arrays. Fixed-shape samples: GlobalBatchSampler + Batcher (augmented); a text's random
 * windows: GlobalBatchSampler + RandomWindowBatcher (textWindows.ts). Speech: utterances in
 * length-bucketed batches (BucketBatchSampler, so a batch pads little), each slice padded to its own
 * longest utterance — or to the global batch's longest, for a model-parallel section whose devices
 * exchange frames (every device's slice must then have the same frames per sample).
 */
import { GlobalBatchSampler, type RankBatch } from './sampler.ts';
import { Batcher, type Batch } from './batcher.ts';
import { augmenterFor } from './augment.ts';
import type { AugmentSpec } from './spec.ts';
import type { Dataset } from './dataset.ts';
import { BucketBatchSampler } from './bucketSampler.ts';
import { gatherSpeechBatch } from '../speech/speechBatch.ts';
import type { SpeechDataset } from '../speech/speechDataset.ts';
import { RandomWindowBatcher } from './textWindows.ts';

export interface BatchOptions {
  /** GLOBAL batch size */
  batchSize: number;
  worldSize: number;
  rank: number;
  seed: number;
  shuffle: boolean;
  augment?: AugmentSpec;
  /** speech: global batches per length-sorting pool */
  poolBatches?: number;
  /** speech: pad every rank's slice to the global batch's longest utterance */
  padToGlobalBatch?: boolean;
}

export interface TrainingBatches {
  stepsPerEpoch(): number;
  /** this rank's slices of the epoch's global batches */
  epoch(epoch: number): Iterable<RankBatch>;
  /** the samples of a slice, as arrays (overwritten or replaced by the next call) */
  gather(batch: RankBatch, epoch: number): Batch;
}

/** The batches of `ds` for one rank. */
export function trainingBatches(ds: Dataset, o: BatchOptions): TrainingBatches {
  if (ds.speech) return speechBatches(ds.speech, o);
  const sampler = new GlobalBatchSampler({
    count: ds.count,
    batchSize: o.batchSize,
    worldSize: o.worldSize,
    rank: o.rank,
    seed: o.seed,
    shuffle: o.shuffle,
    dropLast: false,
  });
  // a text's random windows: sample i of epoch e starts where (seed, e, i) draws (textWindows.ts)
  const batcher =
    ds.text?.windows === 'random'
      ? new RandomWindowBatcher(ds.text, o.seed)
      : new Batcher(ds, 0, augmenterFor(o.augment, ds.sampleShape, o.seed));
  return {
    stepsPerEpoch: () => sampler.stepsPerEpoch(),
    epoch: (e) => sampler.epoch(e),
    gather: (b, e) => batcher.gather(b.indices, e),
  };
}

/** The label of the alphabet's space (symbol k is label k + 1), or undefined without one. */
export function spaceLabel(ds: SpeechDataset): number | undefined {
  const k = ds.alphabet.symbols.indexOf(' ');
  return k < 0 ? undefined : k + 1;
}

/** A slice of utterances as a Batch: inputs [n, T, F·(2C+1)], labels padded [n, S], and the sequence's lengths. */
export function speechBatch(ds: SpeechDataset, indices: ArrayLike<number>, minFrames = 0): Batch {
  const b = gatherSpeechBatch(ds, indices, minFrames);
  const space = spaceLabel(ds);
  return {
    images: b.inputs,
    labels: b.labels,
    count: b.count,
    sequence: {
      frames: b.maxFrames,
      lengths: b.lengths,
      labelLengths: b.labelLengths,
      ...(space !== undefined ? { space } : {}),
      describe: (k: number) => ds.sources[b.indices[k]!]!,
    },
  };
}

function speechBatches(ds: SpeechDataset, o: BatchOptions): TrainingBatches {
  const sampler = new BucketBatchSampler({
    lengths: ds.frames,
    batchSize: o.batchSize,
    worldSize: o.worldSize,
    rank: o.rank,
    seed: o.seed,
    shuffle: o.shuffle,
    dropLast: false,
    poolBatches: o.poolBatches,
  });
  let order: { epoch: number; permutation: Int32Array } | null = null;
  /** the longest utterance of the global batch `b` is a slice of (every rank computes the same) */
  const globalFrames = (b: RankBatch, epoch: number): number => {
    if (order?.epoch !== epoch) order = { epoch, permutation: sampler.permutation(epoch) };
    const start = b.step * o.batchSize;
    let most = 0;
    for (let k = start; k < start + b.globalBatchSize; k++) most = Math.max(most, ds.frames[order.permutation[k]!]!);
    return most;
  };
  return {
    stepsPerEpoch: () => sampler.stepsPerEpoch(),
    epoch: (e) => sampler.epoch(e),
    gather: (b, e) => speechBatch(ds, b.indices, o.padToGlobalBatch ? globalFrames(b, e) : 0),
  };
}
