import type { Tensor } from '../tensor/tensor.ts';
import { logAdd, logSoftmaxRows } from '../nn/ctcForwardBackward.ts';
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

export interface BeamSearchOptions {
  /** prefixes kept per frame; default 16 */
  beamWidth?: number;
  /** class index of the blank; default 0 */
  blank?: number;
}

/** A prefix is a node of a trie (its labels are the path from the root), so extending it is a map lookup. */
class Prefix {
  children: Map<number, Prefix> | null = null;
  pb = -Infinity;
  pnb = -Infinity;
  nextPb = -Infinity;
  nextPnb = -Infinity;
  /** the frame whose next* this prefix holds, so each frame resets them once */
  stamp = -1;
  constructor(readonly label: number, readonly parent: Prefix | null, readonly length: number) {}

  child(label: number): Prefix {
    this.children ??= new Map();
    let c = this.children.get(label);
    if (!c) { c = new Prefix(label, this, this.length + 1); this.children.set(label, c); }
    return c;
  }

  labels(): Int32Array {
    const out = new Int32Array(this.length);
    for (let p: Prefix = this, j = this.length - 1; p.parent !== null; p = p.parent, j--) out[j] = p.label;
    return out;
  }
}

/**
 * Prefix beam search over one sample's `frames` rows of `classes` logits from `offset`
 * (log-softmax inside). Returns up to beamWidth hypotheses, most probable first.
 */
export function prefixBeamSearch(logits: Float32Array, frames: number, classes: number,
                                 options: BeamSearchOptions = {}, offset = 0): BeamHypothesis[] {
  const { beamWidth = 16, blank = 0 } = options;
  if (!(Number.isInteger(beamWidth) && beamWidth >= 1)) throw new Error(`CTC beam search: beamWidth must be an integer ≥ 1, got ${beamWidth}`);
  if (!(Number.isInteger(blank) && blank >= 0 && blank < classes)) {
    throw new Error(`CTC beam search: blank ${blank} is not a class of the ${classes} logits per frame`);
  }
  const root = new Prefix(-1, null, 0);
  root.pb = 0;
  let beam: Prefix[] = [root];
  const lp = new Float64Array(classes);
  for (let t = 0; t < frames; t++) {
    logSoftmaxRows(logits, offset + t * classes, 1, classes, lp);
    const touched: Prefix[] = [];
    const at = (p: Prefix): Prefix => {
      if (p.stamp !== t) { p.stamp = t; p.nextPb = -Infinity; p.nextPnb = -Infinity; touched.push(p); }
      return p;
    };
    for (const p of beam) {
      const total = logAdd(p.pb, p.pnb);
      const self = at(p);
      self.nextPb = logAdd(self.nextPb, total + lp[blank]!);
      if (p.parent !== null) self.nextPnb = logAdd(self.nextPnb, p.pnb + lp[p.label]!);
      for (let k = 0; k < classes; k++) {
        if (k === blank) continue;
        const ext = at(p.child(k));
        // a repeated label needs a blank in between, else it would merge into p itself
        ext.nextPnb = logAdd(ext.nextPnb, (k === p.label ? p.pb : total) + lp[k]!);
      }
    }
    for (const p of touched) { p.pb = p.nextPb; p.pnb = p.nextPnb; }
    touched.sort((a, b) => logAdd(b.pb, b.pnb) - logAdd(a.pb, a.pnb));
    beam = touched.length > beamWidth ? touched.slice(0, beamWidth) : touched;
  }
  return beam.map((p) => ({ labels: p.labels(), logProb: logAdd(p.pb, p.pnb) }))
    .filter((h) => h.logProb > -Infinity);
}

/** The best hypothesis of prefix beam search for every sample of [N, T, C] logits. */
export function beamSearchBatch(logits: Tensor, inputLengths: ArrayLike<number>, options: BeamSearchOptions = {}): BeamHypothesis[] {
  const { n, frames, classes } = sequenceShape(logits, inputLengths, 'CTC beam search');
  const out: BeamHypothesis[] = [];
  for (let i = 0; i < n; i++) {
    const best = prefixBeamSearch(logits.data, inputLengths[i]!, classes, options, i * frames * classes)[0];
    out.push(best ?? { labels: new Int32Array(0), logProb: -Infinity });
  }
  return out;
}
