/**
 * `loss: ctc` — the CTC loss (ctc/ctcLoss.ts) as a Loss of the training loop, for speech data: outputs
 * [N, T, C] (per-frame logits), labels padded to [N, S] as the speech batch holds them (symbol k of
 * the alphabet is label k + 1), and a SequenceTargets with the model's output lengths. Besides the
 * loss and its gradient it reports what the transcripts look like: each sample greedy-decoded over
 * its valid frames, `correct` counting exact transcripts and `errors` the character and word edits
 * (summed by the caller over micro-batches and devices before dividing: CER, WER).
 *
 * Classes: the blank is class `blank`; the alphabet's symbols are the other classes in order
 * (ctc/ctcDecode.ts's convention), so with blank 0 (the default) class c is label c, and with the
 * blank last (DeepSpeech's) label l is class l − 1.
 */
import type { Tensor } from '../tensor/tensor.ts';
import type { Backend } from '../kernels/backend.ts';
import { CtcLoss, ctcGradScale, type CtcReduction } from '../ctc/ctcLoss.ts';
import type { ErrorCounts, Loss, LossResult, SequenceTargets } from './loss.ts';
import { greedyDecode } from '../ctc/ctcDecode.ts';
import { addLabelErrors } from '../ctc/labelErrors.ts';

export class CtcSequenceLoss implements Loss {
  readonly task = 'transcription' as const;
  private readonly ctc: CtcLoss;
  private classes = new Int32Array(0);

  constructor(
    backend: Backend,
    readonly options: { blank: number; reduction: CtcReduction; zeroInfinity: boolean },
  ) {
    this.ctc = new CtcLoss(backend, options);
  }

  /** The class of data label `l` (symbol l − 1) under this blank. */
  classOf(label: number): number {
    return label - 1 < this.options.blank ? label - 1 : label;
  }

  compute(
    outputs: Tensor,
    labels: Int32Array,
    gradScale: number,
    _targets?: Float32Array,
    sequence?: SequenceTargets,
  ): LossResult {
    if (!sequence)
      throw new Error(
        'loss ctc: the batch has no sequence lengths; the CTC loss trains on a speech dataset (data: { dataset: speech, dir: DIR })',
      );
    const { inputLengths, labelLengths, describe } = sequence;
    const n = labelLengths.length;
    // data labels → classes (the identity for blank 0)
    if (this.classes.length < labels.length) this.classes = new Int32Array(labels.length);
    const classes = this.classes.subarray(0, labels.length);
    for (let j = 0; j < labels.length; j++) classes[j] = labels[j]! > 0 ? this.classOf(labels[j]!) : 0;
    const scale = ctcGradScale(this.options.reduction, gradScale, sequence.globalBatch ?? n);
    const r = this.ctc.compute(outputs, { labels: classes, labelLengths, inputLengths, describe }, scale);
    const { correct, errors } = this.transcripts(outputs, classes, sequence);
    return { lossSum: r.lossSum, correct, errors, dlogits: r.dlogits };
  }

  /** Greedy decoding of each sample against its labels: exact transcripts and edit counts. */
  private transcripts(
    outputs: Tensor,
    classes: Int32Array,
    s: SequenceTargets,
  ): { correct: number; errors: ErrorCounts } {
    const [n, frames, c] = outputs.shape as [number, number, number];
    const width = n > 0 ? classes.length / n : 0;
    const space = s.space === undefined ? undefined : this.classOf(s.space);
    const errors: ErrorCounts = { charErrors: 0, chars: 0, wordErrors: 0, words: 0 };
    let correct = 0;
    for (let i = 0; i < n; i++) {
      const hyp = greedyDecode(outputs.data, s.inputLengths[i]!, c, this.options.blank, i * frames * c);
      const ref = classes.subarray(i * width, i * width + s.labelLengths[i]!);
      const before = errors.charErrors;
      addLabelErrors(errors, ref, hyp, space);
      if (errors.charErrors === before && hyp.length === ref.length) correct++;
    }
    return { correct, errors };
  }
}
