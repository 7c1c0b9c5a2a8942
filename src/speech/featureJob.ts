/**
 * One utterance's raw (un-normalised) features from its WAV file: the unit of work that loading a
 * speech dataset runs on this thread or hands to a feature worker (featureWorkers.ts), so both give
 * the same values and the same errors.
 */
import type { FeatureExtractor } from './features.ts';
import { readWav } from './wav.ts';

/** What one utterance's features need: the file, and its name for messages. */
export interface FeatureJob {
  /** absolute path of the WAV file */
  path: string;
  /** `train.csv:12: wavs/a.wav`, which starts every error about the file */
  name: string;
}

/** Reads, resamples and computes; an utterance shorter than one analysis window is an error naming it. */
export function featuresOfFile(job: FeatureJob, extractor: FeatureExtractor): Float32Array {
  const o = extractor.options;
  const audio = readWav(job.path, o.sampleRate, job.name);
  const { data, frames } = extractor.compute(audio.samples);
  if (frames === 0) {
    throw new Error(
      `${job.name}: ${(audio.samples.length / o.sampleRate).toFixed(3)} s of audio is shorter than one ${o.windowMs} ms analysis window; remove the line or the file`,
    );
  }
  return data;
}
