/** What an evaluation reports, and its metrics as the fields of an 'eval' event. */
import type { ErrorCounts } from '../../nn/loss.ts';

/** What evaluation reports: the mean loss and the task's metrics. */
export interface EvalResult {
  loss: number;
  /** classification: accuracy; multi-label: per-label accuracy; regression: NaN (does not apply) */
  accuracy: number;
  /** regression: mean absolute error over every output */
  mae?: number;
  /** multi-label: fraction of samples with every label right */
  exactMatch?: number;
  /** transcription (accuracy: exact transcripts): greedy decoding's character and word error rates, from `errors` */
  cer?: number;
  wer?: number;
  errors?: ErrorCounts;
}

type Extras<P extends string> = { [K in `${P}Mae` | `${P}ExactMatch` | `${P}CER` | `${P}WER`]?: number };

/** An evaluation's metrics beyond loss and accuracy, as 'eval' event fields (testMae, testExactMatch, testCER, testWER; `val…` for the validation set). */
export function evalExtras<P extends 'test' | 'val' = 'test'>(r: EvalResult, prefix: P = 'test' as P): Extras<P> {
  const out: Record<string, number> = {};
  if (r.mae !== undefined) out[`${prefix}Mae`] = r.mae;
  if (r.exactMatch !== undefined) out[`${prefix}ExactMatch`] = r.exactMatch;
  if (r.cer !== undefined) out[`${prefix}CER`] = r.cer;
  if (r.wer !== undefined) out[`${prefix}WER`] = r.wer;
  return out as Extras<P>;
}
