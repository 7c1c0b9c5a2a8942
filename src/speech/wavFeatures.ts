/**
 * The model input of one WAV file, as a speech dataset would present it: features (resampled,
 * extracted, normalised per utterance as the options say) with the context window stacked —
 * frames × F·(2C + 1) values. What `paratrain transcribe` feeds a trained model.
 */
import { contextSize, stackContext } from './context.ts';
import { FeatureExtractor } from './features.ts';
import type { FeatureOptions } from './featureOptions.ts';
import { normalizeUtterance } from './normalize.ts';
import { readWav } from './wav.ts';

export interface WavInput {
  /** frames × width values */
  inputs: Float32Array;
  frames: number;
  /** values per frame: featureSize · (2·context + 1) */
  width: number;
}

/** Reads `path` and computes its model input under `options`; errors name the file. */
export function wavFeatures(
  path: string,
  options: FeatureOptions,
  extractor = new FeatureExtractor(options),
): WavInput {
  const audio = readWav(path, options.sampleRate);
  const { data, frames } = extractor.compute(audio.samples);
  if (frames === 0) {
    throw new Error(
      `${path}: ${(audio.samples.length / options.sampleRate).toFixed(3)} s of audio is shorter than one ${options.windowMs} ms analysis window`,
    );
  }
  const f = extractor.geometry.featureSize;
  if (options.normalize === 'utterance') normalizeUtterance(data, frames, f);
  return { inputs: stackContext(data, frames, f, options.context), frames, width: contextSize(f, options.context) };
}
