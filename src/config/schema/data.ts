/** The `data:` section: which dataset, where, and how it is batched, normalised into `DataSpec`. */
import type { DataSpec } from '../../data/spec.ts';
import { bool, oneOf, posInt, section, str } from './fields.ts';

export const dataSchema = section({
  dataset: oneOf(['fashion-mnist'] as const).default('fashion-mnist'),
  dir: str('a directory path').optional(),
  batchSize: posInt().default(64),
  batchSizeScope: oneOf(['perDevice', 'global'] as const).default('perDevice'),
  shuffle: bool().default(true),
  trainLimit: posInt().optional(),
  testLimit: posInt().optional(),
}).transform((o): DataSpec => {
  const out: DataSpec = { dataset: o.dataset, batchSize: o.batchSize, batchSizeScope: o.batchSizeScope, shuffle: o.shuffle };
  if (o.dir !== undefined) out.dir = o.dir;
  if (o.trainLimit !== undefined) out.trainLimit = o.trainLimit;
  if (o.testLimit !== undefined) out.testLimit = o.testLimit;
  return out;
});
