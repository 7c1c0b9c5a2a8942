import { hashInts } from '../tensor/rng.ts';
import { formatShape } from '../tensor/shape.ts';
import type { Backend } from '../kernels/backend.ts';
import type { LayerSpec, ResidualSpec, TransformerBlockSpec } from './spec.ts';
import type { NestedBuilder } from './buildAddBlock.ts';
import { LayerChain } from './layerChain.ts';
import { isSequenceShape } from './sequence.ts';

/** nn.LayerNorm's default, as GPT-2's blocks use it. */
const LAYER_NORM_EPSILON = 1e-5;

/**
 * The two residual blocks a transformerBlock on D features stands for (GPT-2's pre-norm block):
 * attn = x + [layerNorm, attention, dropout](x), then mlp = x + [layerNorm, dense gelu, dense, dropout](x).
 * The dropout layers are there only when `dropout` > 0 and come last, so parameter names do not depend on it.
 */
export function transformerResiduals(spec: TransformerBlockSpec, D: number): { attn: ResidualSpec; mlp: ResidualSpec } {
  const norm: LayerSpec = { type: 'layerNorm', epsilon: LAYER_NORM_EPSILON };
  const drop: LayerSpec[] = spec.dropout > 0 ? [{ type: 'dropout', rate: spec.dropout, masks: 'per-replica' }] : [];
  const dense = (units: number, activation: 'gelu' | 'linear'): LayerSpec => ({
    type: 'dense',
    units,
    activation,
    useBias: true,
    parallel: 'data',
  });
  const residual = (layers: LayerSpec[]): ResidualSpec => ({
    type: 'residual',
    layers,
    shortcut: [],
    activation: 'linear',
  });
  return {
    attn: residual([
      norm,
      { type: 'attention', heads: spec.heads, causal: spec.causal, dropout: spec.dropout },
      ...drop,
    ]),
    mlp: residual([norm, dense(spec.mlp ?? 4 * D, 'gelu'), dense(D, 'linear'), ...drop]),
  };
}

/**
 * A transformerBlock as one layer of the model: its two residual blocks, built by `build` (so
 * nested layers are named by their path, 'model.layers[2].transformerBlock.attn.residual.layers[1]
 * attention'), chained under the prefixes `attn` and `mlp`: a checkpoint names its tensors
 * `layers.<i>.attn.layers.1.in_proj_weight`, `layers.<i>.mlp.layers.1.kernel`, ….
 */
export function buildTransformerBlock(
  backend: Backend,
  spec: TransformerBlockSpec,
  key: number,
  inputShape: readonly number[],
  name: string,
  build: NestedBuilder,
): LayerChain {
  if (!isSequenceShape(inputShape)) {
    throw new Error(
      `${name}: expects a sequence [frames, features] but receives shape ${formatShape(inputShape)}; ` +
        'put it after an embedding (or a dense layer on a sequence)',
    );
  }
  const D = inputShape[1]!;
  if (D % spec.heads !== 0) {
    const fit = [...Array(D).keys()].map((h) => h + 1).filter((h) => D % h === 0);
    throw new Error(
      `${name}: heads: ${spec.heads} does not divide the ${D} features (each head takes D/heads of them); ` +
        `use heads: ${fit.slice(0, 8).join(', ')}, or change the width before this block`,
    );
  }
  const path = name.endsWith(` ${spec.type}`) ? name.slice(0, -spec.type.length - 1) : name;
  const { attn, mlp } = transformerResiduals(spec, D);
  const attnBlock = build(attn, hashInts(key, 1), inputShape, `${path}.transformerBlock.attn residual`);
  const mlpBlock = build(mlp, hashInts(key, 2), attnBlock.outputShape, `${path}.transformerBlock.mlp residual`);
  return new LayerChain(backend, name, inputShape, [
    { prefix: 'attn', layer: attnBlock },
    { prefix: 'mlp', layer: mlpBlock },
  ]);
}
