/**
 * `train.divergence`: when a finite training loss that blows up stops the run (the guard is
 * runtime/device/divergenceGuard.ts). On by default; false turns it off, true takes every default.
 */
import { z } from 'zod';
import type { DivergenceSpec } from '../runConfig.ts';
import { field, isNum, posInt, posNum, strict } from './fields.ts';

/** The defaults: a loss 100 times its best for 50 steps in a row; no healthy run of the examples comes near. */
export const DEFAULT_DIVERGENCE: DivergenceSpec = { factor: 100, steps: 50 };

const divergenceSchema = strict(
  {
    // a factor of 1 or less would stop a run on a plateau
    factor: field<number>((v) => isNum(v) && v > 1, 'expected a number > 1').default(DEFAULT_DIVERGENCE.factor),
    steps: posInt().default(DEFAULT_DIVERGENCE.steps),
    bound: posNum().optional(),
  },
  'option',
  undefined,
  '`{ factor: 100, steps: 50, bound: 1000 }`',
);

const EXPECTED = 'expected true, false or { factor: number > 1, steps: positive integer, bound: number > 0 }';

/** `train.divergence`: true (default: every default), false, or { factor, steps, bound }. */
export function divergenceField() {
  return z
    .unknown()
    .default(true)
    .transform((v, ctx): DivergenceSpec | false => {
      if (v === false) return false;
      if (v !== true && (v === null || typeof v !== 'object' || Array.isArray(v))) {
        ctx.addIssue({ code: 'custom', message: EXPECTED });
        return z.NEVER;
      }
      const r = divergenceSchema.safeParse(v === true ? {} : v);
      if (!r.success) {
        for (const iss of r.error.issues) ctx.addIssue(iss as z.core.$ZodRawIssue);
        return z.NEVER;
      }
      const { factor, steps, bound } = r.data;
      return bound === undefined ? { factor, steps } : { factor, steps, bound };
    });
}
