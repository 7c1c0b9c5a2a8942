import type { Tensor } from '../tensor/tensor.ts';
import { logAdd, logSoftmaxRows } from './ctcForwardBackward.ts';
import { sequenceShape } from './ctcDecode.ts';

/**
 * CTC prefix beam search without a language model (Graves 2012, §7.5; Hannun et al. 2014,
 * "First-Pass Large Vocabulary Continuous Speech Recognition using Bi-Directional Recurrent
 * DNNs", algorithm 1), in log space.
 *
 * A prefix (a labelling so far) carries two log-probabilities: of the alignments of the frames
 * so far that produce it and end in a blank (pb) or in its last label (pnb). A frame extends every
 * prefix in the beam: by a blank (→ pb), by its own last label again (merged: → its pnb, only
 * from pnb), by another label (→ the longer prefix's pnb, from pb + pnb), and by its last label
 * after a blank (→ the longer prefix "…aa", only from pb). The `beamWidth` most probable prefixes
 * (pb ⊕ pnb) survive each frame. With a beam wide enough never to prune, the result is the most
 * probable labelling and its exact probability, which best-path (greedy) decoding can miss.
 */

export interface BeamHypothesis {
  /** the labelling: class indices, blanks removed */
  labels: Int32Array;
  /** log p(labels | x) summed over the alignments the beam kept */
  logProb: number;
}

/** Options of prefix beam search: how many prefixes to keep, and the blank class. */
export interface BeamSearchOptions {
  /** prefixes kept per frame; default 16 */
  beamWidth?: number;
  /** class index of the blank; default 0 */
  blank?: number;
}

/** A prefix: its last label and the prefix before it (the labels are the path back to the root). */
class Prefix {
  /** index in the current beam, valid while `frame` is the frame being processed */
  slot = -1;
  frame = -1;
  constructor(
    readonly label: number,
    readonly parent: Prefix | null,
    readonly length: number,
    public pb: number,
    public pnb: number,
  ) {}

  labels(): Int32Array {
    const out = new Int32Array(this.length);
    for (let p: Prefix = this, j = this.length - 1; p.parent !== null; p = p.parent, j--) out[j] = p.label;
    return out;
  }
}

/**
 * Prefix beam search over one sample's `frames` rows of `classes` logits from `offset`
 * (log-softmax inside). Returns up to beamWidth hypotheses, most probable first.
 *
 * A prefix has one parent, so an extension p + k that is not already in the beam gets
 * probability from p alone: its score is known without making it, and only the extensions that
 * win a place in the beam become objects (at most beamWidth per frame).
 */
export function prefixBeamSearch(
  logits: Float32Array,
  frames: number,
  classes: number,
  options: BeamSearchOptions = {},
  offset = 0,
): BeamHypothesis[] {
  const { beamWidth = 16, blank = 0 } = options;
  if (!(Number.isInteger(beamWidth) && beamWidth >= 1))
    throw new Error(`CTC beam search: beamWidth must be an integer ≥ 1, got ${beamWidth}`);
  if (!(Number.isInteger(blank) && blank >= 0 && blank < classes)) {
    throw new Error(`CTC beam search: blank ${blank} is not a class of the ${classes} logits per frame`);
  }
  const W = beamWidth,
    lp = new Float64Array(classes);
  // per beam member j: its next pb, pnb and total; per (j, k): the score of the new prefix j + k,
  // or the beam member that already is j + k (index + 1)
  const nb = new Float64Array(W),
    nnb = new Float64Array(W),
    totals = new Float64Array(W);
  const ext = new Float64Array(W * classes),
    member = new Int32Array(W * classes);
  const ranked = new Float64Array(W + W * classes);
  let beam: Prefix[] = [new Prefix(-1, null, 0, 0, -Infinity)];
  for (let t = 0; t < frames; t++) {
    logSoftmaxRows(logits, offset + t * classes, 1, classes, lp);
    const n = beam.length;
    member.fill(0, 0, n * classes);
    for (let j = 0; j < n; j++) {
      beam[j]!.slot = j;
      beam[j]!.frame = t;
    }
    for (let j = 0; j < n; j++) {
      const q = beam[j]!,
        parent = q.parent;
      if (parent !== null && parent.frame === t) member[parent.slot * classes + q.label] = j + 1;
    }
    for (let j = 0; j < n; j++) {
      const p = beam[j]!;
      totals[j] = logAdd(p.pb, p.pnb);
      nb[j] = totals[j]! + lp[blank]!;
      // the last label again without a blank merges into p
      nnb[j] = p.parent !== null ? p.pnb + lp[p.label]! : -Infinity;
    }
    for (let j = 0; j < n; j++) {
      const p = beam[j]!,
        total = totals[j]!;
      for (let k = 0; k < classes; k++) {
        const i = j * classes + k;
        ext[i] = -Infinity;
        if (k === blank) continue;
        // a repeated label needs a blank in between (only pb), any other label follows both
        const score = (k === p.label ? p.pb : total) + lp[k]!;
        const q = member[i]!;
        if (q > 0) nnb[q - 1] = logAdd(nnb[q - 1]!, score);
        else ext[i] = score;
      }
    }
    // keep the W best of the beam's continuations and the new prefixes (ties: beam first, then in order)
    for (let j = 0; j < n; j++) totals[j] = logAdd(nb[j]!, nnb[j]!);
    const count = n + n * classes;
    ranked.set(totals.subarray(0, n), 0);
    ranked.set(ext.subarray(0, n * classes), n);
    const sorted = ranked.subarray(0, count).sort();
    const cut = count > W ? sorted[count - W]! : -Infinity;
    let above = 0;
    for (let i = count - 1; i >= 0 && sorted[i]! > cut; i--) above++;
    let ties = W - above;
    const next: Prefix[] = [];
    const keep = (score: number): boolean => score > cut || (score === cut && score > -Infinity && ties-- > 0);
    for (let j = 0; j < n; j++) {
      if (!keep(totals[j]!)) continue;
      const p = beam[j]!;
      p.pb = nb[j]!;
      p.pnb = nnb[j]!;
      next.push(p);
    }
    for (let i = 0; i < n * classes; i++) {
      if (!keep(ext[i]!)) continue;
      const p = beam[Math.floor(i / classes)]!;
      next.push(new Prefix(i % classes, p, p.length + 1, -Infinity, ext[i]!));
    }
    beam = next;
  }
  return beam
    .map((p) => ({ labels: p.labels(), logProb: logAdd(p.pb, p.pnb) }))
    .filter((h) => h.logProb > -Infinity)
    .sort((a, b) => b.logProb - a.logProb);
}

/** The best hypothesis of prefix beam search for every sample of [N, T, C] logits. */
export function beamSearchBatch(
  logits: Tensor,
  inputLengths: ArrayLike<number>,
  options: BeamSearchOptions = {},
): BeamHypothesis[] {
  const { n, frames, classes } = sequenceShape(logits, inputLengths, 'CTC beam search');
  const out: BeamHypothesis[] = [];
  for (let i = 0; i < n; i++) {
    const best = prefixBeamSearch(logits.data, inputLengths[i]!, classes, options, i * frames * classes)[0];
    out.push(best ?? { labels: new Int32Array(0), logProb: -Infinity });
  }
  return out;
}
