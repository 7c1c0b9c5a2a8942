/**
 * The transformer layers of the `model:` section, on sequences [T, D] (docs/models.md#transformers):
 *
 *   - attention: { heads: 4, causal: true, dropout: 0 }
 *   - transformerBlock: { heads: 4, mlp: 512, dropout: 0, causal: true }   # mlp absent: 4·D
 *   - transformerBlock: { heads: 4, parallel: model }   # Megatron's split: heads and MLP units across devices
 */
import type { AttentionSpec, TransformerBlockSpec } from '../../nn/spec.ts';
import { bool, oneOf, posInt, strict, unitRange } from './fields.ts';

const attention = strict({
  heads: posInt(),
  causal: bool().default(true),
  dropout: unitRange().default(0),
}).transform((o): AttentionSpec => ({ type: 'attention', heads: o.heads, causal: o.causal, dropout: o.dropout }));

const transformerBlock = strict({
  heads: posInt(),
  mlp: posInt().optional(),
  dropout: unitRange().default(0),
  causal: bool().default(true),
  parallel: oneOf(['data', 'model'] as const).default('data'),
}).transform(
  (o): TransformerBlockSpec => ({
    type: 'transformerBlock',
    heads: o.heads,
    // absent means 4·D, known once the block's input width is
    ...(o.mlp !== undefined ? { mlp: o.mlp } : {}),
    dropout: o.dropout,
    causal: o.causal,
    // data-parallel is the absence of the field, so existing blocks' specs stay as they were
    ...(o.parallel === 'model' ? { parallel: 'model' as const } : {}),
  }),
);

export const TRANSFORMER_LAYERS = { attention, transformerBlock };
