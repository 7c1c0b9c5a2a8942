/**
 * Character and word errors of decoded label sequences against reference ones, without turning
 * them into text: one label is one symbol (one code point) of the alphabet, so the edit distance
 * over labels is the edit distance over characters, and words are the runs of labels between
 * `space` labels — exactly what errorRates.ts counts on the text (splitWords drops empty words).
 */
import { editDistance } from './errorRates.ts';

/** The words of a label sequence as strings (code points = labels), split on `space`; none without one. */
export function labelWords(labels: ArrayLike<number>, space: number | undefined): string[] {
  const words: string[] = [];
  let word = '';
  for (let j = 0; j < labels.length; j++) {
    const c = labels[j]!;
    if (c === space) {
      if (word) words.push(word);
      word = '';
    } else word += String.fromCodePoint(c);
  }
  if (word) words.push(word);
  return words;
}

/** Adds the errors of `hyp` against `ref` into `into`: character edits and reference length, word edits and word count. */
export function addLabelErrors(
  into: { charErrors: number; chars: number; wordErrors: number; words: number },
  ref: ArrayLike<number>,
  hyp: ArrayLike<number>,
  space: number | undefined,
): void {
  into.charErrors += editDistance(ref, hyp);
  into.chars += ref.length;
  const refWords = labelWords(ref, space);
  into.wordErrors += editDistance(refWords, labelWords(hyp, space));
  into.words += refWords.length;
}
