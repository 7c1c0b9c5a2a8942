/**
 * The token layers of the `model:` section (docs/models.md, language models): `embedding` (token
 * ids [T] → [T, dim]), `positionEncoding` (learned or sinusoidal) and `tiedEmbedding` (the output
 * projection sharing the embedding's weight), and the model-wide rules they follow: the embedding
 * is the first layer, and a tiedEmbedding takes the embedding's vocabulary.
 */
import type { z } from 'zod';
import type { EmbeddingSpec, LayerSpec, PositionEncodingSpec, TiedEmbeddingSpec } from '../../nn/spec.ts';
import type { IssueParams } from '../errors.ts';
import { oneOf, posInt, strict } from './fields.ts';

const embedding = strict({ vocab: posInt().optional(), dim: posInt() }).transform(
  (o): EmbeddingSpec => ({ type: 'embedding', dim: o.dim, ...(o.vocab !== undefined ? { vocab: o.vocab } : {}) }),
);

const positionEncoding = strict({ encoding: oneOf(['learned', 'sinusoidal'] as const).default('learned') }).transform(
  (o): PositionEncodingSpec => ({ type: 'positionEncoding', encoding: o.encoding }),
);

// `vocab` is filled in from the model's embedding (a saved config.yaml holds it)
const tiedEmbedding = strict({ vocab: posInt().optional() }, 'option', 'tiedEmbedding').transform(
  (o): TiedEmbeddingSpec => ({ type: 'tiedEmbedding', ...(o.vocab !== undefined ? { vocab: o.vocab } : {}) }),
);

export const EMBEDDING_LAYERS = { embedding, positionEncoding, tiedEmbedding };

/**
 * The model's layers with each tiedEmbedding given the embedding's vocabulary; an embedding that is
 * not the first layer, or a tiedEmbedding without one (or with another vocab), is an issue at its path.
 */
export function tieEmbeddingSpecs(layers: LayerSpec[], ctx: z.core.$RefinementCtx): LayerSpec[] {
  const issue = (path: (string | number)[], message: string) =>
    ctx.addIssue({ code: 'custom', path: ['layers', ...path], params: { noGot: true } satisfies IssueParams, message });
  const first = layers[0]?.type === 'embedding' ? (layers[0] as EmbeddingSpec) : undefined;
  layers.forEach((l, i) => {
    if (l.type === 'embedding' && i > 0)
      issue([i, 'embedding'], 'an embedding takes the token ids, so it must be the first layer (model.layers[0])');
  });
  return layers.map((l, i) => {
    if (l.type !== 'tiedEmbedding') return l;
    if (!first) {
      issue(
        [i, 'tiedEmbedding'],
        'shares the weights of the model’s embedding, but model.layers[0] is not an embedding; start the model with embedding: { vocab, dim }, or project with dense: { units: vocab }',
      );
      return l;
    }
    if (l.vocab !== undefined && first.vocab !== undefined && l.vocab !== first.vocab) {
      issue(
        [i, 'tiedEmbedding', 'vocab'],
        `is ${l.vocab} but the embedding it shares (model.layers[0]) has vocab ${first.vocab}; leave it out (it is the embedding's)`,
      );
    }
    return first.vocab === undefined ? l : { ...l, vocab: first.vocab };
  });
}
