import type { Tensor } from '../tensor/tensor.ts';

/**
 * Greedy (best-path) CTC decoding and turning class indices into text.
 *
 * Class convention: a model over an alphabet of A symbols has C = A + 1 classes, the alphabet's
 * symbols in order with the blank inserted at index `blank` — blank 0 (PyTorch's habit) makes
 * class c the symbol symbols[c − 1]; blank A (DeepSpeech's, the last class) makes it symbols[c].
 */

/** The [N, T, C] logits' sizes, checked against the per-sample frame counts. */
export function sequenceShape(
  logits: Tensor,
  inputLengths: ArrayLike<number>,
  what: string,
): { n: number; frames: number; classes: number } {
  if (logits.shape.length !== 3) {
    throw new Error(
      `${what}: logits must be [N, T, C] (batch, frames, classes), got shape [${logits.shape.join(', ')}]`,
    );
  }
  const [n, frames, classes] = logits.shape as [number, number, number];
  if (inputLengths.length !== n)
    throw new Error(`${what}: ${n} samples need ${n} input lengths, got ${inputLengths.length}`);
  for (let i = 0; i < n; i++) {
    const len = inputLengths[i]!;
    if (!(Number.isInteger(len) && len >= 0 && len <= frames)) {
      throw new Error(
        `${what}: sample ${i} of the batch has input length ${len}, outside 0 … ${frames} (the batch's frames)`,
      );
    }
  }
  return { n, frames, classes };
}

/**
 * Best-path decoding of one sample: the most probable class of each of its `frames` frames
 * (first maximum wins a tie), repeats merged, blanks dropped. `logits` (or log-probabilities, or
 * probabilities: the arg-max is the same) hold frames × classes values from `offset`.
 */
export function greedyDecode(logits: Float32Array, frames: number, classes: number, blank = 0, offset = 0): Int32Array {
  const out: number[] = [];
  let prev = -1;
  for (let t = 0; t < frames; t++) {
    const base = offset + t * classes;
    let best = 0,
      bestValue = logits[base]!;
    for (let k = 1; k < classes; k++) {
      const v = logits[base + k]!;
      if (v > bestValue) {
        bestValue = v;
        best = k;
      }
    }
    if (best !== prev && best !== blank) out.push(best);
    prev = best;
  }
  return Int32Array.from(out);
}

/** Greedy decoding of every sample of [N, T, C] logits over its first inputLengths[i] frames. */
export function greedyDecodeBatch(logits: Tensor, inputLengths: ArrayLike<number>, blank = 0): Int32Array[] {
  const { n, frames, classes } = sequenceShape(logits, inputLengths, 'greedy CTC decoding');
  const out: Int32Array[] = [];
  for (let i = 0; i < n; i++)
    out.push(greedyDecode(logits.data, inputLengths[i]!, classes, blank, i * frames * classes));
  return out;
}

/** The text of decoded classes under the class convention above (`symbols`: the alphabet, no blank). */
export function labelsToText(labels: ArrayLike<number>, symbols: readonly string[], blank = 0): string {
  let text = '';
  for (let j = 0; j < labels.length; j++) {
    const c = labels[j]!;
    const s = c === blank ? undefined : symbols[c < blank ? c : c - 1];
    if (s === undefined) {
      throw new Error(
        `CTC decoding: class ${c} is not a symbol of the ${symbols.length}-symbol alphabet with blank ${blank} (classes 0 … ${symbols.length})`,
      );
    }
    text += s;
  }
  return text;
}
