/**
 * `dataset: text` (docs/data.md#text): character-level language modelling. The corpus (textCorpus.ts)
 * is split at a fraction from its end (the last `data.validation` of the characters is the
 * validation split, as nanoGPT does), the vocabulary is the training split's characters sorted by
 * code point (vocabulary.ts), and each split is cut into windows of model.input[0] characters
 * (textWindows.ts): the validation split always sequentially, every T characters.
 */
import type { Dataset } from './dataset.ts';
import { locateInCorpus, readCorpus } from './textCorpus.ts';
import { Vocabulary } from './vocabulary.ts';
import { windowCount, windowsDataset } from './textWindows.ts';
import type { TextTokens } from './textTokens.ts';
import type { TextDataSpec } from './spec.ts';

/** T from model.input: [T] (or [T, 1]) token ids per window. */
export function contextLength(inputShape: readonly number[]): number {
  const [t, extra] = inputShape;
  if (t === undefined || inputShape.length > 2 || (extra !== undefined && extra !== 1) || !(t >= 1)) {
    throw new Error(
      `model.input: a text dataset's samples are windows of T characters, model.input [T] (e.g. [64]), but model.input is [${inputShape.join(', ')}]`,
    );
  }
  return t;
}

/** The training and validation splits of the text `spec` names, as Datasets of windows. */
export function loadTextSplits(
  spec: TextDataSpec,
  inputShape: readonly number[],
): { train: Dataset; validation?: Dataset; source: string } {
  const t = contextLength(inputShape);
  const { windows, validation: fraction } = spec;
  const stride = spec.stride ?? t;
  const corpus = readCorpus(spec, spec.dir);
  const total = corpus.points.length;
  // nanoGPT's split: the first ⌊(1 − f)·n⌋ characters train, the rest validate
  const cut = Math.floor(total * (1 - fraction));
  const trainPoints = corpus.points.subarray(0, cut);
  const vocabulary = Vocabulary.of(trainPoints);
  const locate = (from: number) => (i: number) => locateInCorpus(corpus, from + i);
  const split = (from: number, to: number, windowsOf: TextTokens['windows'], step: number): TextTokens => ({
    vocabulary: [...vocabulary.symbols],
    tokens: vocabulary.encode(
      corpus.points.subarray(from, to),
      locate(from),
      "the vocabulary is the training split's characters; use a smaller data.validation, or remove the character",
    ),
    context: t,
    windows: windowsOf,
    stride: step,
    fingerprint: corpus.fingerprint,
  });
  const trainText = split(0, cut, windows, stride);
  if (windowCount(cut, t, stride) === 0) {
    throw new Error(
      `data: the training split of ${corpus.source} is ${cut} characters, too short for one window of ${t} characters and the next one (model.input [${t}]); use a longer text, a shorter context or a smaller data.validation`,
    );
  }
  const train = windowsDataset(`${corpus.source} (training part)`, trainText);
  const source = `text ${corpus.source} (${total.toLocaleString('en-US')} characters, ${vocabulary.size} distinct; ${windows} windows of ${t})`;
  if (fraction === 0) return { train, source };
  if (windowCount(total - cut, t, t) === 0) {
    throw new Error(
      `data.validation: the last ${fraction} of ${corpus.source} is ${total - cut} characters, too short for one window of ${t} characters and the next one; use a larger fraction, or validation: 0 for none`,
    );
  }
  const validation = windowsDataset(
    `${corpus.source} (validation: the last ${fraction})`,
    split(cut, total, 'sequential', t),
  );
  return { train, validation, source };
}
