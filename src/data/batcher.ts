import { labelsPerSample, sampleSize, type Dataset } from './dataset.ts';
import type { Augmenter } from './augment.ts';

export interface Batch {
  /** count × H × W × C, NHWC; a sequence batch: count × frames × F */
  images: Float32Array;
  /** a class per sample; a text dataset's windows: T next tokens per sample [count, T]; a sequence batch: label sequences padded to [count, S] */
  labels: Int32Array;
  /** count × targetSize values, when the dataset has targets (regression, multi-label) */
  targets?: Float32Array;
  count: number;
  /** a batch of variable-length sequences (speech: data/batches.ts) */
  sequence?: SequenceBatch;
}

/**
 * What a batch of sequences carries besides its padded inputs [N, frames, F] and padded labels
 * [N, S]: the valid frames of each sample (ForwardContext.lengths) and its label count (the CTC
 * loss's targets, with the model's output lengths).
 */
export interface SequenceBatch {
  /** T: the frames every sample is padded to */
  frames: number;
  /** [N] valid frames per sample */
  lengths: Int32Array;
  /** [N] labels per sample */
  labelLengths: Int32Array;
  /** the label of the word separator (the alphabet's space), for word error counts */
  space?: number;
  /** names sample k of the batch in errors: its manifest file and line */
  describe?: (k: number) => string;
}

/**
 * Copies the samples at `indices` into `intoImages` / `intoLabels` / `intoTargets` (when given;
 * they must be large enough) and returns views of exactly the batch's length. Without buffers it
 * allocates. Targets come along when the dataset has them.
 */
export function gather(
  ds: Dataset,
  indices: ArrayLike<number>,
  intoImages?: Float32Array,
  intoLabels?: Int32Array,
  intoTargets?: Float32Array,
): Batch {
  const n = indices.length;
  const size = sampleSize(ds);
  const per = ds.targets ? (ds.targetSize ?? 0) : 0;
  const l = labelsPerSample(ds);
  if (intoImages && intoImages.length < n * size) {
    throw new Error(
      `gather(${ds.name}): the image buffer holds ${intoImages.length} values, the batch of ${n} needs ${n * size}`,
    );
  }
  if (intoLabels && intoLabels.length < n * l) {
    throw new Error(`gather(${ds.name}): the label buffer holds ${intoLabels.length} labels, the batch needs ${n * l}`);
  }
  if (intoTargets && intoTargets.length < n * per) {
    throw new Error(
      `gather(${ds.name}): the target buffer holds ${intoTargets.length} values, the batch needs ${n * per}`,
    );
  }
  const images = intoImages ? intoImages.subarray(0, n * size) : new Float32Array(n * size);
  const labels = intoLabels ? intoLabels.subarray(0, n * l) : new Int32Array(n * l);
  const targets = per > 0 ? (intoTargets ? intoTargets.subarray(0, n * per) : new Float32Array(n * per)) : undefined;
  const src = ds.images,
    tsrc = ds.targets;
  for (let k = 0; k < n; k++) {
    const i = indices[k]!;
    if (!(i >= 0 && i < ds.count && Number.isInteger(i))) {
      throw new Error(`gather(${ds.name}): sample index ${i} is outside 0..${ds.count - 1}`);
    }
    // a plain loop: subarray()+set() would allocate a view per sample
    const from = i * size,
      to = k * size;
    for (let j = 0; j < size; j++) images[to + j] = src[from + j]!;
    for (let j = 0; j < l; j++) labels[k * l + j] = ds.labels[i * l + j]!;
    if (targets) for (let j = 0; j < per; j++) targets[k * per + j] = tsrc![i * per + j]!;
  }
  return targets ? { images, labels, targets, count: n } : { images, labels, count: n };
}

/**
 * Reusable batch buffers for one dataset: sized for the largest batch on first use (or up front),
 * so steady-state steps allocate no sample memory. With an augmenter (training batches), each
 * gathered sample is augmented by its (seed, epoch, index) transform.
 */
export class Batcher {
  private images: Float32Array;
  private labels: Int32Array;
  private targets: Float32Array;

  constructor(
    readonly dataset: Dataset,
    capacity = 0,
    readonly augmenter: Augmenter | null = null,
  ) {
    this.images = new Float32Array(capacity * sampleSize(dataset));
    this.labels = new Int32Array(capacity * labelsPerSample(dataset));
    this.targets = new Float32Array(capacity * this.perSample);
  }

  private get perSample(): number {
    return this.dataset.targets ? (this.dataset.targetSize ?? 0) : 0;
  }

  /** The batch at `indices` (augmented as of `epoch`); its arrays are overwritten by the next call. */
  gather(indices: ArrayLike<number>, epoch = 0): Batch {
    const l = labelsPerSample(this.dataset);
    if (indices.length * l > this.labels.length) {
      this.images = new Float32Array(indices.length * sampleSize(this.dataset));
      this.labels = new Int32Array(indices.length * l);
      this.targets = new Float32Array(indices.length * this.perSample);
    }
    const batch = gather(this.dataset, indices, this.images, this.labels, this.targets);
    this.augmenter?.apply(batch.images, indices, epoch);
    return batch;
  }
}
