/**
 * Windows of a text: sample k of a split is T token ids and its labels the T ids that follow each
 * (the next character at every position). Sequential windows start every `stride` characters and
 * are the Dataset's arrays; random ones (training) start at offsets drawn per (seed, epoch, sample),
 * the same on every device and for any device count, so an epoch sees new windows and a seed
 * repeats them.
 */
import { CounterRng } from '../tensor/rng.ts';
import type { Batch } from './batcher.ts';
import type { Dataset } from './dataset.ts';
import type { TextTokens } from './textTokens.ts';

/** Salt separating the window offsets' stream from the other streams keyed by the same seed. */
const WINDOW_STREAM = 0x7e47;

/** Windows of T ids (each with T next ids) that start every `stride` ids in `tokens` ids. */
export function windowCount(tokens: number, context: number, stride: number): number {
  return tokens <= context ? 0 : Math.floor((tokens - context - 1) / stride) + 1;
}

/** The windows of `text` at 0, stride, 2·stride… as a Dataset of task language. */
export function windowsDataset(name: string, text: TextTokens): Dataset {
  const { tokens, context: t, stride } = text;
  const count = windowCount(tokens.length, t, stride);
  const images = new Float32Array(count * t),
    labels = new Int32Array(count * t);
  for (let k = 0; k < count; k++) {
    const from = k * stride;
    for (let j = 0; j < t; j++) {
      images[k * t + j] = tokens[from + j]!;
      labels[k * t + j] = tokens[from + j + 1]!;
    }
  }
  return {
    name,
    images,
    labels,
    count,
    sampleShape: [t],
    classes: text.vocabulary.length,
    task: 'language',
    labelsPerSample: t,
    text,
  };
}

/** The start of sample `index`'s window in epoch `epoch` (random windows): uniform over every whole window. */
export function randomWindowStarts(text: TextTokens, seed: number, epoch: number): (index: number) => number {
  const rng = new CounterRng(seed, epoch, WINDOW_STREAM);
  const starts = text.tokens.length - text.context;
  return (index) => Math.floor(rng.at(index) * starts);
}

/**
 * Training batches of random windows: sample i of epoch e is the window at
 * randomWindowStarts(seed, e)(i). Buffers grow to the largest batch and are reused.
 */
export class RandomWindowBatcher {
  private images = new Float32Array(0);
  private labels = new Int32Array(0);
  private drawn: { epoch: number; start: (index: number) => number } | null = null;

  constructor(
    readonly text: TextTokens,
    readonly seed: number,
  ) {
    if (text.tokens.length <= text.context)
      throw new Error(
        `random windows: the text has ${text.tokens.length} characters, fewer than one window of ${text.context + 1}`,
      );
  }

  /** The windows of samples `indices` in epoch `epoch`; the arrays are overwritten by the next call. */
  gather(indices: ArrayLike<number>, epoch: number): Batch {
    const n = indices.length,
      t = this.text.context,
      tokens = this.text.tokens;
    if (this.images.length < n * t) {
      this.images = new Float32Array(n * t);
      this.labels = new Int32Array(n * t);
    }
    if (this.drawn?.epoch !== epoch) this.drawn = { epoch, start: randomWindowStarts(this.text, this.seed, epoch) };
    const images = this.images.subarray(0, n * t),
      labels = this.labels.subarray(0, n * t);
    for (let k = 0; k < n; k++) {
      const from = this.drawn.start(indices[k]!);
      for (let j = 0; j < t; j++) {
        images[k * t + j] = tokens[from + j]!;
        labels[k * t + j] = tokens[from + j + 1]!;
      }
    }
    return { images, labels, count: n };
  }
}
