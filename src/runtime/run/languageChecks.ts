/**
 * A language run's embedding against its text, before anything is built or written: the embedding's
 * vocab is the dataset's vocabulary size (the config says it: a vocab filled in from the data would
 * make the run's config differ from the one a resume is given), so an unset or different vocab is
 * one error naming the size to set.
 */
import type { Dataset } from '../../data/dataset.ts';
import type { RunConfig } from '../../config/runConfig.ts';

/** Throws when the model's embedding has no vocab, or (a text dataset) not the vocabulary's size. */
export function checkLanguageRun(config: RunConfig, data: { train: Dataset }): void {
  const first = config.model.layers[0];
  if (first?.type !== 'embedding') return;
  const ds = data.train;
  const tokens = ds.task === 'language' ? ds.classes : undefined;
  const fix = (vocab: number) => `set embedding: { vocab: ${vocab}, dim: ${first.dim} }`;
  if (first.vocab === undefined) {
    throw new Error(
      tokens === undefined
        ? `model.layers[0].embedding.vocab: not set; ${ds.name} is not a text dataset, so set vocab to the number of distinct token ids its samples hold`
        : `model.layers[0].embedding.vocab: not set; the vocabulary of ${ds.name} has ${tokens} tokens: ${fix(tokens)}`,
    );
  }
  if (tokens !== undefined && first.vocab !== tokens) {
    throw new Error(
      `model.layers[0].embedding.vocab: ${first.vocab}, but the vocabulary of ${ds.name} has ${tokens} tokens ` +
        `(its training split's characters); ${fix(tokens)}`,
    );
  }
}
