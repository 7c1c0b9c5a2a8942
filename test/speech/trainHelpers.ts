import { parseConfig } from '../../src/config/index.ts';
import { packSpeechDataset } from '../../src/speech/speechDataset.ts';
import { DEFAULT_ALPHABET } from '../../src/speech/alphabet.ts';
import { resolveFeatureOptions } from '../../src/speech/featureOptions.ts';
import { speechAsDataset } from '../../src/data/speech.ts';
import type { Dataset } from '../../src/data/dataset.ts';
import type { RunConfig } from '../../src/config/runConfig.ts';
import { randomArray } from '../util/close.ts';

/**
 * A synthetic speech dataset (no audio): `count` utterances of 6 … 21 frames of `featureSize`
 * random features, each with a 1–4 symbol transcript over the default alphabet (spaces included),
 * so batches of it have variable lengths and CTC has alignments for every sample.
 */
export function syntheticSpeech(
  count: number,
  o: { featureSize?: number; context?: number; seed?: number } = {},
): Dataset {
  const F = o.featureSize ?? 4,
    seed = o.seed ?? 1;
  const noise = randomArray(count * 64, seed + 7);
  const parts = Array.from({ length: count }, (_, i) => {
    const frames = 6 + Math.floor((noise[i]! + 1) * 7.99);
    const n = 1 + (i % 4);
    const labels = Int32Array.from({ length: n }, (_, j) => (j === 1 && n > 2 ? 1 : 2 + ((i * 7 + j * 3) % 26)));
    const text = Array.from(labels, (l) => DEFAULT_ALPHABET.symbols[l - 1]!).join('');
    return {
      features: randomArray(frames * F, seed * 1000 + i),
      frames,
      labels,
      source: `synthetic.csv:${i + 2} (u${i}.wav)`,
      transcript: text,
    };
  });
  const options = resolveFeatureOptions({ coefficients: F, context: o.context ?? 0 });
  return speechAsDataset(packSpeechDataset('synthetic', parts, F, DEFAULT_ALPHABET, options));
}

/** A tiny DeepSpeech-shaped model over `width` inputs per frame; `layers` replaces the stack. */
export function speechConfig(
  o: {
    width?: number;
    layers?: unknown[];
    train?: Record<string, unknown>;
    data?: Record<string, unknown>;
    loss?: unknown;
    optimizer?: unknown;
  } = {},
): RunConfig {
  return parseConfig(
    {
      model: {
        input: [null, o.width ?? 4],
        layers: o.layers ?? [
          { dense: { units: 8, activation: 'clippedRelu' } },
          { dropout: { rate: 0.2, masks: 'per-sample' } },
          { lstm: { units: 5, bidirectional: 'concat' } },
          { dense: { units: 29 } },
        ],
      },
      loss: o.loss ?? 'ctc',
      optimizer: o.optimizer ?? { adam: { lr: 0.01 } },
      data: { dataset: 'speech', dir: 'unused', batchSize: 8, batchSizeScope: 'global', ...o.data },
      train: { epochs: 1, seed: 5, evalEvery: 0, backend: 'js', ...o.train },
    },
    'test config',
  );
}
