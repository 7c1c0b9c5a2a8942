/**
 * `residual` and `add` layers: blocks that hold layers of their own (a small ResNet in YAML).
 *
 *   - residual: { layers: [ {conv2d: …}, {batchNorm: {}}, {relu: {}}, {conv2d: …} ], shortcut: [ …projection… ], activation: relu }
 *   - add: { branches: [ [ …layers… ], [] ], activation: relu }     # [] is the identity
 *
 * Nested layers may be any layer but spatialSplit, and not `parallel: model`.
 */
import { z } from 'zod';
import type { ActivationKind } from '../../kernels/activation.ts';
import type { AddSpec, LayerSpec, ResidualSpec } from '../../nn/spec.ts';
import type { IssueParams } from '../errors.ts';
import { oneKeyMap, oneOf, strict } from './fields.ts';

const LIST_ERROR =
  'expected a list of layers, each a one-key map such as `- conv2d: { filters: 16, kernelSize: 3, padding: same }`';

/** The `residual` and `add` schemas over the plain layer schemas `base`. */
export function addBlockSchemas<B extends Record<string, z.ZodType<LayerSpec>>>(
  base: B,
  activations: readonly ActivationKind[],
) {
  // eslint-disable-next-line prefer-const -- assigned once the block schemas exist (they refer to each other)
  let nested: z.ZodType<LayerSpec>;
  const list = z.array(
    z.lazy(() => nested),
    { error: LIST_ERROR },
  );
  const activation = oneOf(activations as readonly [ActivationKind, ...ActivationKind[]]).default('linear');

  const residual = strict(
    {
      layers: list.min(1, { error: 'expected at least one layer (the block; its shortcut is added to their output)' }),
      shortcut: list.default([]),
      activation,
    },
    'option',
    'residual',
    '`{ layers: [...], shortcut: [...], activation: relu }`',
  ).transform((o, ctx): ResidualSpec => {
    refuseModelParallel(o.layers, ['layers'], ctx);
    refuseModelParallel(o.shortcut, ['shortcut'], ctx);
    return { type: 'residual', layers: o.layers, shortcut: o.shortcut, activation: o.activation };
  });

  const add = strict(
    {
      branches: z
        .array(list, { error: 'expected a list of branches, each a list of layers ([] is the identity)' })
        .min(2, { error: 'expected at least two branches to add ([] is the identity)' }),
      activation,
    },
    'option',
    'add',
    '`{ branches: [[...], []], activation: relu }`',
  ).transform((o, ctx): AddSpec => {
    for (const [i, b] of o.branches.entries()) refuseModelParallel(b, ['branches', i], ctx);
    return { type: 'add', branches: o.branches, activation: o.activation };
  });

  nested = oneKeyMap({
    noun: 'layer type',
    choices: { ...base, residual, add },
    example: '`conv2d: { filters: 16, kernelSize: 3 }`',
    refuse: (name) =>
      name === 'spatialSplit'
        ? 'a spatialSplit cannot be inside a residual or add block; put the spatialSplit before or after the block'
        : undefined,
  }) as z.ZodType<LayerSpec>;
  return { residual, add };
}

/** A block's layers are replicated: 'parallel: model' has no section to join there. */
function refuseModelParallel(layers: readonly LayerSpec[], at: (string | number)[], ctx: z.core.$RefinementCtx): void {
  layers.forEach((l, k) => {
    if ((l.type !== 'dense' && l.type !== 'conv2d') || l.parallel !== 'model') return;
    ctx.addIssue({
      code: 'custom',
      path: [...at, k, l.type, 'parallel'],
      params: { noGot: true } satisfies IssueParams,
      message:
        "'parallel: model' cannot be used inside a residual or add block; the block runs data-parallel — move the layer out of the block",
    });
  });
}
