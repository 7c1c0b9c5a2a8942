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

/** Frames an alignment of `labels` (`length` of them from `offset`) needs: one per label, plus a blank between each pair of equal adjacent labels. */
export function ctcMinFrames(labels: ArrayLike<number>, length = labels.length, offset = 0): number {
  let frames = length;
  for (let j = offset + 1; j < offset + length; j++) if (labels[j] === labels[j - 1]) frames++;
  return frames;
}

/** Grow-only scratch for the recursion (reused across samples and steps). */
export class CtcWorkspace {
  alpha = new Float64Array(0);
  betaA = new Float64Array(0);
  betaB = new Float64Array(0);
  /** per-class posterior Σ_{s: l′_s = k} e^{α + β − log p} at one frame */
  acc = new Float64Array(0);
  /** the extended label sequence l′ */
  ext = new Int32Array(0);
  /** skip[s] = 1 where the transition s − 2 → s is allowed */
  skip = new Uint8Array(0);

  reserve(frames: number, states: number, classes: number): void {
    if (this.alpha.length < frames * states) this.alpha = new Float64Array(frames * states);
    if (this.betaA.length < states) {
      this.betaA = new Float64Array(states);
      this.betaB = new Float64Array(states);
      this.ext = new Int32Array(states);
      this.skip = new Uint8Array(states);
    }
    if (this.acc.length < classes) this.acc = new Float64Array(classes);
  }
}

/** Where one sample's labels and gradient rows start in the batch's arrays (no per-sample views). */
export interface CtcOffsets {
  /** index of the first label in `labels`; default 0 */
  labels?: number;
  /** number of labels; default labels.length */
  labelCount?: number;
  /** index of the first gradient value in `grad`; default 0 */
  grad?: number;
}
const NO_OFFSETS: CtcOffsets = {};

/** log(e^a + e^b + e^c), exact for −∞ terms; NaN in, NaN out. */
function logSum3(a: number, b: number, c: number): number {
  const m = Math.max(a, b, c);
  if (m === -Infinity) return m;
  return m + Math.log(Math.exp(a - m) + Math.exp(b - m) + Math.exp(c - m));
}

/**
 * Negative log-likelihood −log p(labels | x) of one sample and, when `grad` is given and the
 * loss is finite, its gradient w.r.t. the logits times `scale`: grad[t, k] = scale·(softmax[t, k] −
 * Σ_{s: l′_s = k} e^{α_t(s) + β_t(s) − log p}) for t < frames (rows past `frames` are not touched).
 *
 * `logProbs` holds the sample's log-softmax, `frames` rows of `classes`; `labels` its S labels
 * (none equal to `blank`; `at` says where they and the gradient rows start in batch arrays). Returns +∞ when no alignment exists (too few frames, or probabilities
 * that are exactly 0); `grad` is then left alone. NaN logits give NaN (the training loop skips such a step).
 *
 * Only the band of states that lie on some complete alignment is computed: at frame t a state
 * s ≤ 2t + 1 (reachable from the start) and s ≥ L − 2·(frames − t) (able to reach the end).
 */
export function ctcSample(
  logProbs: Float64Array,
  frames: number,
  classes: number,
  labels: Int32Array,
  blank: number,
  ws: CtcWorkspace,
  grad: Float32Array | null,
  scale: number,
  at: CtcOffsets = NO_OFFSETS,
): number {
  const S = at.labelCount ?? labels.length,
    L = 2 * S + 1,
    lo0 = at.labels ?? 0,
    g0 = at.grad ?? 0;
  if (frames === 0) return S === 0 ? 0 : Infinity;
  ws.reserve(frames, L, classes);
  const { alpha, ext, skip } = ws;
  for (let s = 0; s < L; s++) {
    ext[s] = s & 1 ? labels[lo0 + ((s - 1) >> 1)]! : blank;
    // a skip from s − 2 to s is allowed onto a label that differs from the label two states back
    skip[s] = (s & 1) === 1 && s >= 3 && ext[s] !== ext[s - 2] ? 1 : 0;
  }
  const lo = (t: number): number => Math.max(0, L - 2 * (frames - t));
  const hi = (t: number): number => Math.min(L - 1, 2 * t + 1);

  alpha.fill(-Infinity, 0, L);
  alpha[0] = logProbs[blank]!;
  if (L > 1) alpha[1] = logProbs[ext[1]!]!;
  for (let t = 1; t < frames; t++) {
    const prev = (t - 1) * L,
      cur = t * L,
      lp = t * classes;
    alpha.fill(-Infinity, cur, cur + L);
    for (let s = lo(t), end = hi(t); s <= end; s++) {
      const a = logSum3(
        alpha[prev + s]!,
        s >= 1 ? alpha[prev + s - 1]! : -Infinity,
        skip[s] ? alpha[prev + s - 2]! : -Infinity,
      );
      alpha[cur + s] = a + logProbs[lp + ext[s]!]!;
    }
  }
  const last = (frames - 1) * L;
  const logP = L > 1 ? logAdd(alpha[last + L - 1]!, alpha[last + L - 2]!) : alpha[last]!;
  if (logP === -Infinity) return Infinity;
  if (grad === null) return -logP;

  let beta = ws.betaA,
    next = ws.betaB;
  beta.fill(-Infinity, 0, L);
  beta[L - 1] = 0;
  if (L > 1) beta[L - 2] = 0;
  const acc = ws.acc;
  for (let t = frames - 1; ; t--) {
    // the gradient of frame t from the posteriors e^{α_t + β_t − log p} (each ≤ 1: plain sums)
    acc.fill(0, 0, classes);
    const row = t * L,
      first = lo(t),
      end = hi(t);
    for (let s = first; s <= end; s++) acc[ext[s]!] += Math.exp(alpha[row + s]! + beta[s]! - logP);
    const lp = t * classes;
    for (let k = 0; k < classes; k++) grad[g0 + lp + k] = scale * (Math.exp(logProbs[lp + k]!) - acc[k]!);
    if (t === 0) break;
    // β_{t−1}(s) = logsumexp over s′ ∈ {s, s+1, s+2 (skip)} of β_t(s′) + log y_t(l′_s′)
    next.fill(-Infinity, 0, L);
    for (let s = lo(t - 1), stop = hi(t - 1); s <= stop; s++) {
      next[s] = logSum3(
        beta[s]! + logProbs[lp + ext[s]!]!,
        s + 1 < L ? beta[s + 1]! + logProbs[lp + ext[s + 1]!]! : -Infinity,
        s + 2 < L && skip[s + 2] ? beta[s + 2]! + logProbs[lp + ext[s + 2]!]! : -Infinity,
      );
    }
    const swap = beta;
    beta = next;
    next = swap;
  }
  return -logP;
}

/**
 * Log-softmax of `frames` rows of `classes` float32 logits into float64 `out` (max subtracted
 * first, so large logits cannot overflow).
 */
export function logSoftmaxRows(
  logits: Float32Array,
  offset: number,
  frames: number,
  classes: number,
  out: Float64Array,
): void {
  for (let t = 0; t < frames; t++) {
    const base = offset + t * classes,
      o = t * classes;
    let max = -Infinity;
    for (let k = 0; k < classes; k++) max = Math.max(max, logits[base + k]!);
    let sum = 0;
    for (let k = 0; k < classes; k++) sum += Math.exp(logits[base + k]! - max);
    const lse = max + Math.log(sum);
    for (let k = 0; k < classes; k++) out[o + k] = logits[base + k]! - lse;
  }
}
