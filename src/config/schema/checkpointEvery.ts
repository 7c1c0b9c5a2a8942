/**
 * `train.checkpointEvery`: how often a checkpoint set is written. A number of epochs (0: only at the
 * end of the run), `{ epochs: N }` (the same, normalised to N) or `{ steps: N }`.
 */
import { z } from 'zod';
import { isInt } from './fields.ts';

const EXPECTED =
  'expected a number of epochs (0: only at the end), { epochs: N } or { steps: N } with N a positive integer';

export function checkpointEveryField() {
  return z
    .custom<number | { epochs: number } | { steps: number }>(
      (v) => {
        if (isInt(v)) return v >= 0;
        if (v === null || typeof v !== 'object' || Array.isArray(v)) return false;
        const keys = Object.keys(v);
        if (keys.length !== 1 || (keys[0] !== 'epochs' && keys[0] !== 'steps')) return false;
        const n = (v as Record<string, unknown>)[keys[0]];
        return isInt(n) && n > 0;
      },
      { error: EXPECTED },
    )
    .transform((v): number | { steps: number } =>
      typeof v === 'number' ? v : 'epochs' in v ? v.epochs : { steps: v.steps },
    );
}
