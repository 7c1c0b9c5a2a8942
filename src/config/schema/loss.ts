/**
 * The `loss:` field: a name (`meanSquaredError`) or a map with its options, written
 * `{ type: softmaxCrossEntropy, labelSmoothing: 0.1 }` or, like the other sections' choices,
 * `{ softmaxCrossEntropy: { labelSmoothing: 0.1 } }`; normalised into a `LossSpec`.
 */
import { z } from 'zod';
import type { LayerSpec, LossSpec } from '../../nn/spec.ts';
import type { IssueParams } from '../errors.ts';
import { didYouMean, formatValue } from '../errors.ts';
import { bool, nonNegInt, oneKeyMap, oneOf, strict, unitRange } from './fields.ts';

const LOSSES = {
  softmaxCrossEntropy: strict({ labelSmoothing: unitRange().default(0) }).transform(
    (o): LossSpec => ({ type: 'softmaxCrossEntropy', labelSmoothing: o.labelSmoothing }),
  ),
  meanSquaredError: strict({}, 'option', 'meanSquaredError').transform((): LossSpec => ({ type: 'meanSquaredError' })),
  binaryCrossEntropy: strict({}, 'option', 'binaryCrossEntropy').transform(
    (): LossSpec => ({ type: 'binaryCrossEntropy' }),
  ),
  ctc: strict({
    blank: nonNegInt().default(0),
    reduction: oneOf(['mean', 'sum', 'batchMean'] as const).default('mean'),
    zeroInfinity: bool().default(false),
  }).transform(
    (o): LossSpec => ({ type: 'ctc', blank: o.blank, reduction: o.reduction, zeroInfinity: o.zeroInfinity }),
  ),
  tokenCrossEntropy: strict({}, 'option', 'tokenCrossEntropy').transform(
    (): LossSpec => ({ type: 'tokenCrossEntropy' }),
  ),
} satisfies Record<LossSpec['type'], z.ZodType<LossSpec>>;

/** The loss names `loss:` accepts. */
export const LOSS_TYPES = Object.keys(LOSSES) as LossSpec['type'][];

const EXAMPLE = '`{ type: softmaxCrossEntropy, labelSmoothing: 0.1 }`';
const asOneKeyMap = oneKeyMap({ noun: 'loss', choices: LOSSES, example: EXAMPLE });

/** `loss:` → LossSpec (default softmaxCrossEntropy without smoothing). */
export const lossSchema = z
  .unknown()
  .transform((v, ctx): LossSpec => {
    if (v !== null && typeof v === 'object' && !Array.isArray(v) && 'type' in v) {
      const { type, ...options } = v as Record<string, unknown>;
      if (typeof type !== 'string' || !Object.hasOwn(LOSSES, type)) {
        const hint = typeof type === 'string' ? didYouMean(type, LOSS_TYPES) : '';
        ctx.addIssue({
          code: 'custom',
          path: ['type'],
          params: { noGot: true } satisfies IssueParams,
          message: `unknown loss ${formatValue(type)}${hint}; expected one of ${LOSS_TYPES.join(', ')}`,
        });
        return z.NEVER;
      }
      const r = LOSSES[type as LossSpec['type']].safeParse(options);
      if (r.success) return r.data;
      for (const iss of r.error.issues) ctx.addIssue(iss as z.core.$ZodRawIssue);
      return z.NEVER;
    }
    const r = asOneKeyMap.safeParse(v);
    if (r.success) return r.data;
    for (const iss of r.error.issues) ctx.addIssue(iss as z.core.$ZodRawIssue);
    return z.NEVER;
  })
  .prefault('softmaxCrossEntropy');

/**
 * A last layer that squashes what the loss expects as logits: softmax before softmaxCrossEntropy
 * (which applies softmax itself), softmax or sigmoid before binaryCrossEntropy (which applies the
 * sigmoid itself). The message, or undefined when the pair is fine.
 */
export function lossAfterLastLayer(layers: readonly LayerSpec[], loss: LossSpec): string | undefined {
  const last = layers[layers.length - 1];
  if (!last) return undefined;
  const at = `model.layers[${layers.length - 1}]`;
  if (last.type === 'softmax' && loss.type !== 'meanSquaredError') {
    const applies =
      loss.type === 'softmaxCrossEntropy' || loss.type === 'tokenCrossEntropy'
        ? 'softmax'
        : loss.type === 'ctc'
          ? 'log-softmax'
          : 'the sigmoid';
    return (
      `${loss.type} takes logits and applies ${applies} itself, but ${at} is a softmax layer; ` +
      `remove it (predictions apply softmax to the logits), or use loss: meanSquaredError to train on the probabilities`
    );
  }
  const sigmoid =
    last.type === 'sigmoid' || ((last.type === 'dense' || last.type === 'conv2d') && last.activation === 'sigmoid');
  if (sigmoid && loss.type === 'binaryCrossEntropy') {
    return `binaryCrossEntropy takes logits and applies the sigmoid itself, but ${at} ends in a sigmoid; remove the sigmoid (leave the last layer linear)`;
  }
  return undefined;
}
