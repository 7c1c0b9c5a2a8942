/**
 * Character and word error rates: the Levenshtein edit distance (substitutions, insertions and
 * deletions each cost 1) between reference and hypothesis, over characters or words, divided by
 * the reference's length. Over a corpus the errors and the reference lengths are SUMMED first
 * (errors / total reference length), so long utterances weigh more — the usual corpus CER/WER
 * (Kaldi's compute-wer, jiwer), not the mean of per-utterance rates.
 *
 * Characters are Unicode code points of the strings as given (spaces count); words are the runs
 * of non-whitespace. Normalising case or punctuation is the caller's (the dataset's alphabet).
 * An empty reference has length 0: its errors are the hypothesis's insertions, and a rate whose
 * total reference length is 0 is 0 when there are no errors and 1 otherwise (never ∞ or NaN, so
 * metrics stay finite JSON).
 */

let rowA = new Int32Array(0),
  rowB = new Int32Array(0);

/** Levenshtein distance between two sequences (elements compared with ===); O(|ref|·|hyp|) time, O(|hyp|) memory. */
export function editDistance<T>(ref: ArrayLike<T>, hyp: ArrayLike<T>): number {
  const n = ref.length,
    m = hyp.length;
  if (n === 0) return m;
  if (m === 0) return n;
  if (rowA.length < m + 1) {
    rowA = new Int32Array(m + 1);
    rowB = new Int32Array(m + 1);
  }
  let prev = rowA,
    cur = rowB;
  for (let j = 0; j <= m; j++) prev[j] = j;
  for (let i = 1; i <= n; i++) {
    cur[0] = i;
    const r = ref[i - 1];
    for (let j = 1; j <= m; j++) {
      const substitute = prev[j - 1]! + (r === hyp[j - 1] ? 0 : 1);
      cur[j] = Math.min(substitute, prev[j]! + 1, cur[j - 1]! + 1);
    }
    const swap = prev;
    prev = cur;
    cur = swap;
  }
  return prev[m]!;
}

/** The words of a text: runs of non-whitespace. */
export function splitWords(text: string): string[] {
  const trimmed = text.trim();
  return trimmed === '' ? [] : trimmed.split(/\s+/u);
}

/** Errors against a reference of `length` units (characters or words). */
export interface ErrorCount {
  errors: number;
  length: number;
}

/** Character edits between reference and hypothesis, and the reference's length in code points. */
export function charErrors(reference: string, hypothesis: string): ErrorCount {
  const ref = Array.from(reference);
  return { errors: editDistance(ref, Array.from(hypothesis)), length: ref.length };
}

/** Word edits between reference and hypothesis, and the reference's length in words. */
export function wordErrors(reference: string, hypothesis: string): ErrorCount {
  const ref = splitWords(reference);
  return { errors: editDistance(ref, splitWords(hypothesis)), length: ref.length };
}

/** errors / length; 0 errors against an empty reference is 0, any error against one is 1. */
export function errorRate(count: ErrorCount): number {
  return count.length > 0 ? count.errors / count.length : count.errors > 0 ? 1 : 0;
}

/** Corpus CER and WER: add (reference, hypothesis) pairs, read the rates of their summed counts. */
export class ErrorRates {
  readonly chars: ErrorCount = { errors: 0, length: 0 };
  readonly words: ErrorCount = { errors: 0, length: 0 };
  utterances = 0;

  add(reference: string, hypothesis: string): void {
    const c = charErrors(reference, hypothesis),
      w = wordErrors(reference, hypothesis);
    this.chars.errors += c.errors;
    this.chars.length += c.length;
    this.words.errors += w.errors;
    this.words.length += w.length;
    this.utterances++;
  }

  /** character error rate over everything added */
  get cer(): number {
    return errorRate(this.chars);
  }
  /** word error rate over everything added */
  get wer(): number {
    return errorRate(this.words);
  }
}
