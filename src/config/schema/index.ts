/**
 * The YAML form of a run configuration, as a zod schema that validates it and normalises it into
 * `RunConfig` (defaults filled in, sizes as [h, w], one-key maps turned into `{ type, ... }`).
 *
 * Every field carries its own human message ("expected a positive integer"); errors.ts adds
 * the file, the path and the value received.
 */
import type { z } from 'zod';
import type { RunConfig } from '../runConfig.ts';
import type { IssueParams } from '../errors.ts';
import { strict } from './fields.ts';
import { modelSchema } from './model.ts';
import { lossAfterLastLayer, lossSchema } from './loss.ts';
import { optimizerSchema, scheduleSchema } from './optimizer.ts';
import { dataSchema } from './data.ts';
import { trainSchema } from './train.ts';
import { multiDeviceIssues } from './deviceChecks.ts';
import { freezeVarianceIssue } from '../../parallel/compression/spec.ts';

export { LAYER_TYPES } from './model.ts';
export { OPTIMIZER_TYPES } from './optimizer.ts';
export { LOSS_TYPES } from './loss.ts';
export { BACKENDS } from './train.ts';

export const SECTIONS = ['model', 'loss', 'optimizer', 'schedule', 'data', 'train'] as const;

export const configSchema = strict(
  {
    model: modelSchema,
    loss: lossSchema,
    optimizer: optimizerSchema,
    schedule: scheduleSchema,
    data: dataSchema,
    train: trainSchema,
  },
  'section',
  undefined,
  '`model: { input: [28, 28, 1], layers: [...] }`',
).transform((o, ctx): RunConfig => {
  // checks that involve more than one field
  if (o.data.batchSizeScope === 'global' && o.data.batchSize % o.train.devices !== 0) {
    ctx.addIssue({
      code: 'custom',
      path: ['data', 'batchSize'],
      message: `with batchSizeScope: global the batch is split across train.devices (${o.train.devices}), so it must be a multiple of ${o.train.devices}`,
    });
  }
  // what several devices ask of the config; the run asks it again of the job's devices (deviceChecks.ts)
  for (const { path, message, noGot } of multiDeviceIssues(o, o.train.devices, true)) {
    ctx.addIssue({ code: 'custom', path, message, ...(noGot ? { params: { noGot } satisfies IssueParams } : {}) });
  }
  const frozen = freezeVarianceIssue(o.train.strategy, o.optimizer.type);
  if (frozen) ctx.addIssue({ code: 'custom', ...frozen, params: { noGot: true } satisfies IssueParams });
  const perDevice =
    o.data.batchSizeScope === 'global' ? Math.floor(o.data.batchSize / o.train.devices) : o.data.batchSize;
  if (o.train.microBatches > perDevice) {
    ctx.addIssue({
      code: 'custom',
      path: ['train', 'microBatches'],
      message: `${o.train.microBatches} micro-batches of a per-device batch of ${perDevice} samples leaves some empty; use at most ${perDevice} (or a larger data.batchSize)`,
    });
  }
  const squashed = lossAfterLastLayer(o.model.layers, o.loss);
  if (squashed)
    ctx.addIssue({ code: 'custom', path: ['loss'], params: { noGot: true } satisfies IssueParams, message: squashed });
  return { model: o.model, loss: o.loss, optimizer: o.optimizer, schedule: o.schedule, data: o.data, train: o.train };
});

// Compile-time check: the schema produces exactly a RunConfig (and accepts any input).
type Assert<T extends true> = T;
type Equals<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
export type _ConfigSchemaProducesRunConfig = Assert<Equals<z.output<typeof configSchema>, RunConfig>>;
