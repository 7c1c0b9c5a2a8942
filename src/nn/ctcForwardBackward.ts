/**
 * The CTC forward–backward recursion of ONE sample, in log space (Graves et al., "Connectionist
 * Temporal Classification", ICML 2006, §3.1–4.1), on float64 log-probabilities.
 *
 * The extended label sequence l′ puts a blank before, between and after the S labels (2S + 1
 * states: even states are blanks, state 2j + 1 is label j). α_t(s) is the log-probability of the
 * prefixes of length t + 1 that end in state s (emission at t included); β_t(s) the
 * log-probability of completing from state s at t (emission at t EXCLUDED), so α_t(s) + β_t(s) is
 * the log-probability of all alignments through s at t, and log p(l|x) = logsumexp_s of it for any t.
 * Only α is stored (frames × states); β is two rows that walk backwards while the gradient of each
 * frame is written.
 */

/** log(e^a + e^b) without overflow; exact when either is −∞. */
export function logAdd(a: number, b: number): number {
  if (a === -Infinity) return b;
  if (b === -Infinity) return a;
  return a > b ? a + Math.log1p(Math.exp(b - a)) : b + Math.log1p(Math.exp(a - b));
}

/** Frames an alignment of `labels` needs: one per label, plus a blank between each pair of equal adjacent labels. */
export function ctcMinFrames(labels: ArrayLike<number>, length = labels.length): number {
  let frames = length;
  for (let j = 1; j < length; j++) if (labels[j] === labels[j - 1]) frames++;
  return frames;
}

/** Grow-only float64 scratch for the recursion (reused across samples and steps). */
export class CtcWorkspace {
  alpha = new Float64Array(0);
  betaA = new Float64Array(0);
  betaB = new Float64Array(0);
  /** per-class log-sum of α + β at one frame */
  acc = new Float64Array(0);

  reserve(frames: number, states: number, classes: number): void {
    if (this.alpha.length < frames * states) this.alpha = new Float64Array(frames * states);
    if (this.betaA.length < states) { this.betaA = new Float64Array(states); this.betaB = new Float64Array(states); }
    if (this.acc.length < classes) this.acc = new Float64Array(classes);
  }
}

/**
 * Negative log-likelihood −log p(labels | x) of one sample and, when `grad` is given and the
 * loss is finite, its gradient w.r.t. the logits times `scale`: grad[t, k] = scale·(softmax[t, k] −
 * Σ_{s: l′_s = k} e^{α_t(s) + β_t(s) − log p}) for t < frames (rows past `frames` are not touched).
 *
 * `logProbs` holds the sample's log-softmax, `frames` rows of `classes`; `labels` its S labels
 * (none equal to `blank`). Returns +∞ when no alignment exists (too few frames, or probabilities
 * that are exactly 0); `grad` is then left alone. NaN logits give NaN (the training loop skips such a step).
 */
export function ctcSample(logProbs: Float64Array, frames: number, classes: number, labels: Int32Array,
                          blank: number, ws: CtcWorkspace, grad: Float32Array | null, scale: number): number {
  const S = labels.length, L = 2 * S + 1;
  if (frames === 0) return S === 0 ? 0 : Infinity;
  ws.reserve(frames, L, classes);
  const { alpha } = ws;
  const label = (s: number): number => (s & 1 ? labels[(s - 1) >> 1]! : blank);
  // a skip from s − 2 to s is allowed onto a label that differs from the label two states back
  const canSkip = (s: number): boolean => (s & 1) === 1 && s >= 3 && labels[(s - 1) >> 1] !== labels[(s - 3) >> 1];

  alpha.fill(-Infinity, 0, L);
  alpha[0] = logProbs[blank]!;
  if (L > 1) alpha[1] = logProbs[labels[0]!]!;
  for (let t = 1; t < frames; t++) {
    const prev = (t - 1) * L, cur = t * L, lp = t * classes;
    for (let s = 0; s < L; s++) {
      let a = alpha[prev + s]!;
      if (s >= 1) a = logAdd(a, alpha[prev + s - 1]!);
      if (canSkip(s)) a = logAdd(a, alpha[prev + s - 2]!);
      alpha[cur + s] = a === -Infinity ? a : a + logProbs[lp + label(s)]!;
    }
  }
  const last = (frames - 1) * L;
  const logP = L > 1 ? logAdd(alpha[last + L - 1]!, alpha[last + L - 2]!) : alpha[last]!;
  if (logP === -Infinity) return Infinity;
  if (grad === null) return -logP;

  let beta = ws.betaA, next = ws.betaB;
  beta.fill(-Infinity, 0, L);
  beta[L - 1] = 0;
  if (L > 1) beta[L - 2] = 0;
  const acc = ws.acc;
  for (let t = frames - 1; ; t--) {
    // the gradient of frame t from α_t + β_t
    acc.fill(-Infinity, 0, classes);
    const row = t * L;
    for (let s = 0; s < L; s++) {
      const v = alpha[row + s]! + beta[s]!;
      if (v > -Infinity) { const k = label(s); acc[k] = logAdd(acc[k]!, v); }
    }
    const lp = t * classes;
    for (let k = 0; k < classes; k++) {
      grad[lp + k] = scale * (Math.exp(logProbs[lp + k]!) - Math.exp(acc[k]! - logP));
    }
    if (t === 0) break;
    // β_{t−1}(s) = logsumexp over s′ ∈ {s, s+1, s+2 (skip)} of β_t(s′) + log y_t(l′_s′)
    for (let s = 0; s < L; s++) {
      let b = beta[s]! + logProbs[lp + label(s)]!;
      if (s + 1 < L) b = logAdd(b, beta[s + 1]! + logProbs[lp + label(s + 1)]!);
      if (s + 2 < L && canSkip(s + 2)) b = logAdd(b, beta[s + 2]! + logProbs[lp + label(s + 2)]!);
      next[s] = b;
    }
    const swap = beta; beta = next; next = swap;
  }
  return -logP;
}

/**
 * Log-softmax of `frames` rows of `classes` float32 logits into float64 `out` (max subtracted
 * first, so large logits cannot overflow).
 */
export function logSoftmaxRows(logits: Float32Array, offset: number, frames: number, classes: number, out: Float64Array): void {
  for (let t = 0; t < frames; t++) {
    const base = offset + t * classes, o = t * classes;
    let max = -Infinity;
    for (let k = 0; k < classes; k++) max = Math.max(max, logits[base + k]!);
    let sum = 0;
    for (let k = 0; k < classes; k++) sum += Math.exp(logits[base + k]! - max);
    const lse = max + Math.log(sum);
    for (let k = 0; k < classes; k++) out[o + k] = logits[base + k]! - lse;
  }
}
