/** The `optimizer:` and `schedule:` sections, normalised into `OptimizerSpec` and `ScheduleSpec`. */
import type { z } from 'zod';
import type { OptimizerSpec, ScheduleSpec, DecaySpec } from '../../optim/spec.ts';
import type { IssueParams } from '../errors.ts';
import { bool, factor, nonNegInt, nonNegNum, oneKeyMap, posInt, posNum, section, strict, unitRange } from './fields.ts';

const sgd = strict({
  lr: posNum(),
  momentum: unitRange().default(0),
  nesterov: bool().default(false),
  weightDecay: nonNegNum().default(0),
}).transform((o, ctx): OptimizerSpec => {
  if (o.nesterov && o.momentum === 0) {
    ctx.addIssue({
      code: 'custom',
      path: ['nesterov'],
      params: { noGot: true } satisfies IssueParams,
      message: 'nesterov: true needs momentum > 0; set momentum (e.g. 0.9) or nesterov: false',
    });
  }
  return { type: 'sgd', lr: o.lr, momentum: o.momentum, nesterov: o.nesterov, weightDecay: o.weightDecay };
});

function adamLike(type: 'adam' | 'adamw', weightDecay: number) {
  return strict({
    lr: posNum().default(0.001),
    beta1: unitRange().default(0.9),
    beta2: unitRange().default(0.999),
    eps: posNum().default(1e-8),
    weightDecay: nonNegNum().default(weightDecay),
  }).transform(
    (o): OptimizerSpec => ({ type, lr: o.lr, beta1: o.beta1, beta2: o.beta2, eps: o.eps, weightDecay: o.weightDecay }),
  );
}

const OPTIMIZERS = { sgd, adam: adamLike('adam', 0), adamw: adamLike('adamw', 0.01) } satisfies Record<
  OptimizerSpec['type'],
  z.ZodType<OptimizerSpec>
>;
export const OPTIMIZER_TYPES = Object.keys(OPTIMIZERS) as OptimizerSpec['type'][];
/** An optimizer as a one-key map (`adam: { lr: 0.001 }`), also a strategy's option (diloco's `outer`). */
export const optimizerMap = oneKeyMap({
  noun: 'optimizer',
  choices: OPTIMIZERS,
  example: '`adam: { lr: 0.001 }`',
});
export const optimizerSchema = optimizerMap.prefault('adam');

const DECAYS = {
  none: strict({}, 'option', 'none').transform((): DecaySpec => ({ type: 'none' })),
  step: strict({ every: posInt(), gamma: factor().default(0.1) }).transform(
    (o): DecaySpec => ({ type: 'step', every: o.every, gamma: o.gamma }),
  ),
  cosine: strict({ minLr: nonNegNum().default(0) }).transform((o): DecaySpec => ({ type: 'cosine', minLr: o.minLr })),
} satisfies Record<DecaySpec['type'], z.ZodType<DecaySpec>>;

export const scheduleSchema = section({
  warmupSteps: nonNegInt().default(0),
  decay: oneKeyMap({ noun: 'decay', choices: DECAYS, example: '`cosine: { minLr: 0 }`' }).prefault('none'),
}).transform((o): ScheduleSpec => ({ warmupSteps: o.warmupSteps, decay: o.decay }));
