/**
 * `train.best` and `train.earlyStopping`: which evaluation metric picks RUN_DIR/model-best.safetensors,
 * and when a run stops because that metric no longer improves. `auto` is resolved once the data is
 * known (runtime/events/tracking.ts), so config.yaml records the concrete choice.
 */
import { z } from 'zod';
import type { BestSpec, EarlyStoppingSpec, EvalMetric } from '../runConfig.ts';
import type { IssueParams } from '../errors.ts';
import { nonNegNum, oneOf, posInt, strict } from './fields.ts';

export const EVAL_METRICS = [
  'valLoss',
  'valAccuracy',
  'testLoss',
  'testAccuracy',
  'valCER',
  'valWER',
  'testCER',
  'testWER',
] as const satisfies readonly EvalMetric[];

/** The better direction of a metric: down for a loss or an error rate, up for an accuracy. */
export const naturalMode = (metric: EvalMetric): 'min' | 'max' => (metric.endsWith('Accuracy') ? 'max' : 'min');

const goalSchema = strict(
  {
    metric: oneOf(EVAL_METRICS),
    mode: oneOf(['min', 'max'] as const).optional(),
  },
  'option',
  undefined,
  '`{ metric: valAccuracy, mode: max }`',
);

const BEST_EXPECTED = `expected auto, false or { metric: ${EVAL_METRICS.join('|')}, mode: max|min }`;

/** `train.best`: 'auto' (default), false, or { metric, mode } with mode defaulting to the metric's better direction. */
export function bestField() {
  return z
    .unknown()
    .default('auto')
    .transform((v, ctx): BestSpec => {
      if (v === undefined || v === 'auto') return 'auto';
      if (v === false) return false;
      if (v === null || typeof v !== 'object' || Array.isArray(v)) {
        ctx.addIssue({ code: 'custom', message: BEST_EXPECTED });
        return z.NEVER;
      }
      const r = goalSchema.safeParse(v);
      if (!r.success) {
        for (const iss of r.error.issues) ctx.addIssue(iss as z.core.$ZodRawIssue);
        return z.NEVER;
      }
      return { metric: r.data.metric, mode: r.data.mode ?? naturalMode(r.data.metric) };
    });
}

const earlyStoppingSchema = strict(
  {
    metric: oneOf([...EVAL_METRICS, 'auto'] as const).default('auto'),
    mode: oneOf(['min', 'max', 'auto'] as const).default('auto'),
    patience: posInt().default(5),
    minDelta: nonNegNum().default(0),
  },
  'option',
  undefined,
  '`{ metric: valLoss, patience: 5, minDelta: 0.001 }`',
);

/** `train.earlyStopping`: false (default), true (every default), or { metric, mode, patience, minDelta }. */
export function earlyStoppingField() {
  return z
    .unknown()
    .default(false)
    .transform((v, ctx): EarlyStoppingSpec | false => {
      if (v === undefined || v === false) return false;
      const r = earlyStoppingSchema.safeParse(v === true ? {} : v);
      if (!r.success) {
        for (const iss of r.error.issues) ctx.addIssue(iss as z.core.$ZodRawIssue);
        return z.NEVER;
      }
      const { metric, mode, patience, minDelta } = r.data;
      if (metric === 'auto' && mode !== 'auto') {
        ctx.addIssue({
          code: 'custom',
          path: ['mode'],
          params: { noGot: true } satisfies IssueParams,
          message: `mode ${mode} needs a metric to apply to; give both, e.g. { metric: valAccuracy, mode: max }`,
        });
        return z.NEVER;
      }
      return { metric, mode: mode === 'auto' && metric !== 'auto' ? naturalMode(metric) : mode, patience, minDelta };
    });
}
