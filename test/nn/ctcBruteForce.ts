/**
 * Independent CTC reference for tiny cases: enumerate every alignment (C^T paths), collapse it
 * (merge repeats, drop blanks) and sum the probabilities of the paths per labelling. No
 * recursion shared with src/ctc/ctcForwardBackward.ts.
 */

/** softmax of each of the `frames` rows of `classes` logits, in float64 */
export function softmaxRows(logits: ArrayLike<number>, frames: number, classes: number): number[][] {
  const rows: number[][] = [];
  for (let t = 0; t < frames; t++) {
    const row = Array.from({ length: classes }, (_, k) => logits[t * classes + k]!);
    const max = Math.max(...row);
    const e = row.map((v) => Math.exp(v - max));
    const z = e.reduce((a, b) => a + b, 0);
    rows.push(e.map((v) => v / z));
  }
  return rows;
}

/** Collapse an alignment: merge runs of equal symbols, then drop blanks. */
export function collapse(path: readonly number[], blank: number): number[] {
  const out: number[] = [];
  let prev = -1;
  for (const k of path) {
    if (k !== prev && k !== blank) out.push(k);
    prev = k;
  }
  return out;
}

/** Probability of every labelling that some alignment of the given frames produces (key: labels joined by ','). */
export function labellingProbabilities(probs: number[][], blank: number): Map<string, number> {
  const frames = probs.length,
    classes = probs[0]?.length ?? 0;
  const out = new Map<string, number>();
  const path = new Array<number>(frames).fill(0);
  const total = classes ** frames;
  for (let code = 0; code < total; code++) {
    let c = code,
      p = 1;
    for (let t = 0; t < frames; t++) {
      path[t] = c % classes;
      c = Math.floor(c / classes);
      p *= probs[t]![path[t]!]!;
    }
    const key = collapse(path, blank).join(',');
    out.set(key, (out.get(key) ?? 0) + p);
  }
  return out;
}

/**
 * −log of the summed probability of the alignments of `frames` rows that collapse to `labels`,
 * summed in log space (max-shifted), so logits in the hundreds do not underflow.
 */
export function bruteForceCtcLoss(
  logits: ArrayLike<number>,
  frames: number,
  classes: number,
  labels: readonly number[],
  blank: number,
): number {
  const logProbs: number[][] = [];
  for (let t = 0; t < frames; t++) {
    const row = Array.from({ length: classes }, (_, k) => logits[t * classes + k]!);
    const max = Math.max(...row);
    const lse = max + Math.log(row.reduce((a, v) => a + Math.exp(v - max), 0));
    logProbs.push(row.map((v) => v - lse));
  }
  const want = labels.join(','),
    matching: number[] = [];
  const path = new Array<number>(frames).fill(0);
  for (let code = 0; code < classes ** frames; code++) {
    let c = code,
      lp = 0;
    for (let t = 0; t < frames; t++) {
      path[t] = c % classes;
      c = Math.floor(c / classes);
      lp += logProbs[t]![path[t]!]!;
    }
    if (collapse(path, blank).join(',') === want) matching.push(lp);
  }
  if (matching.length === 0) return Infinity;
  const max = Math.max(...matching);
  return -(max + Math.log(matching.reduce((a, v) => a + Math.exp(v - max), 0)));
}
