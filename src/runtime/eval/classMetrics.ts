/**
 * Per-class figures of a classifier on labelled samples: the confusion matrix (rows: true class,
 * columns: predicted class) and each class's precision, recall and F1, with their macro average.
 * A class never predicted has precision 0 (and one never present recall 0), as scikit-learn's
 * `zero_division=0` reports them.
 */

export interface ClassFigures {
  /** the class's index */
  class: number;
  name: string;
  precision: number;
  recall: number;
  f1: number;
  /** samples whose true class this is */
  support: number;
}

export interface ClassReport {
  classNames: string[];
  /** confusion[t][p]: samples of true class t predicted as p */
  confusion: number[][];
  perClass: ClassFigures[];
  accuracy: number;
  /** unweighted means over the classes */
  macro: { precision: number; recall: number; f1: number };
  samples: number;
}

/** The argmax of each row of `scores` (count × classes). */
export function argmaxRows(scores: Float32Array, count: number): Int32Array {
  const k = scores.length / count;
  const out = new Int32Array(count);
  for (let s = 0; s < count; s++) {
    let best = 0;
    for (let c = 1; c < k; c++) if (scores[s * k + c]! > scores[s * k + best]!) best = c;
    out[s] = best;
  }
  return out;
}

/** The report for predicted vs true classes (both in 0 … classes − 1). */
export function classReport(
  predicted: ArrayLike<number>,
  truth: ArrayLike<number>,
  classNames: readonly string[],
): ClassReport {
  const k = classNames.length;
  const confusion = Array.from({ length: k }, () => new Array<number>(k).fill(0));
  let correct = 0;
  for (let i = 0; i < truth.length; i++) {
    confusion[truth[i]!]![predicted[i]!]!++;
    if (truth[i] === predicted[i]) correct++;
  }
  const perClass = classNames.map((name, c): ClassFigures => {
    const tp = confusion[c]![c]!;
    const support = confusion[c]!.reduce((a, b) => a + b, 0);
    const predictedAs = confusion.reduce((a, row) => a + row[c]!, 0);
    const precision = predictedAs ? tp / predictedAs : 0;
    const recall = support ? tp / support : 0;
    const f1 = precision + recall > 0 ? (2 * precision * recall) / (precision + recall) : 0;
    return { class: c, name, precision, recall, f1, support };
  });
  const mean = (f: (x: ClassFigures) => number) => perClass.reduce((a, x) => a + f(x), 0) / Math.max(k, 1);
  return {
    classNames: [...classNames],
    confusion,
    perClass,
    samples: truth.length,
    accuracy: truth.length ? correct / truth.length : 0,
    macro: { precision: mean((x) => x.precision), recall: mean((x) => x.recall), f1: mean((x) => x.f1) },
  };
}
