/**
 * The in-memory form of a speech dataset: every utterance's feature frames and label sequence, packed
 * into flat arrays (one Float32Array of all frames, one Int32Array of all labels, with offsets), so a
 * dataset moves to worker threads as a handful of (shareable) buffers rather than thousands of arrays.
 */
import { createHash } from 'node:crypto';
import type { Alphabet } from './alphabet.ts';
import { contextSize } from './context.ts';
import type { FeatureOptions } from './featureOptions.ts';

export interface SpeechDataset {
  /** 'train', 'dev', 'test' (the manifest's name without .csv) */
  name: string;
  /** number of utterances */
  count: number;
  /** values per frame as stored (F: MFCC coefficients or mel filters), before context stacking */
  featureSize: number;
  /** frames stacked on each side when batched (featureOptions.context); a model input is contextSize(F, C) wide */
  context: number;
  /** every utterance's frames, concatenated: Σ frames[i] rows of featureSize values (normalised if asked) */
  features: Float32Array;
  /** utterance i is rows frameOffsets[i] … frameOffsets[i+1] − 1 of `features` (count + 1 entries) */
  frameOffsets: Int32Array;
  /** frames per utterance (T_i) */
  frames: Int32Array;
  /** every label sequence, concatenated: model output indices 1 … K (0, the CTC blank, never appears) */
  labels: Int32Array;
  /** utterance i's labels are labels[labelOffsets[i] … labelOffsets[i+1]) (count + 1 entries) */
  labelOffsets: Int32Array;
  /** `train.csv:12 (wavs/a.wav)` per utterance, for messages (e.g. an utterance too short for its transcript) */
  sources: string[];
  /** the transcripts as written in the manifest */
  transcripts: string[];
  alphabet: Alphabet;
  featureOptions: FeatureOptions;
}

/** One utterance: views into the dataset's arrays (no copy). */
export interface Utterance {
  /** frames × featureSize values */
  features: Float32Array;
  frames: number;
  labels: Int32Array;
  source: string;
}

export function utterance(ds: SpeechDataset, i: number): Utterance {
  if (!(Number.isInteger(i) && i >= 0 && i < ds.count))
    throw new Error(`${ds.name}: utterance ${i} is outside 0 … ${ds.count - 1}`);
  const f0 = ds.frameOffsets[i]!,
    f1 = ds.frameOffsets[i + 1]!;
  return {
    features: ds.features.subarray(f0 * ds.featureSize, f1 * ds.featureSize),
    frames: f1 - f0,
    labels: ds.labels.subarray(ds.labelOffsets[i]!, ds.labelOffsets[i + 1]!),
    source: ds.sources[i]!,
  };
}

/** Values per frame of the model's input: featureSize · (2·context + 1). */
export function speechInputSize(ds: SpeechDataset): number {
  return contextSize(ds.featureSize, ds.context);
}

/** The first n utterances (all if n ≥ count), as views into the same memory: `trainLimit`/`testLimit` for quick runs. */
export function limitSpeechDataset(ds: SpeechDataset, n: number): SpeechDataset {
  if (!Number.isInteger(n) || n < 0)
    throw new Error(`limitSpeechDataset(${ds.name}): the limit must be a whole number ≥ 0, got ${n}`);
  const count = Math.min(n, ds.count);
  return {
    ...ds,
    count,
    features: ds.features.subarray(0, ds.frameOffsets[count]! * ds.featureSize),
    frameOffsets: ds.frameOffsets.subarray(0, count + 1),
    frames: ds.frames.subarray(0, count),
    labels: ds.labels.subarray(0, ds.labelOffsets[count]!),
    labelOffsets: ds.labelOffsets.subarray(0, count + 1),
    sources: ds.sources.slice(0, count),
    transcripts: ds.transcripts.slice(0, count),
  };
}

/** Packs per-utterance features and labels into a SpeechDataset. */
export function packSpeechDataset(
  name: string,
  parts: { features: Float32Array; frames: number; labels: Int32Array; source: string; transcript: string }[],
  featureSize: number,
  alphabet: Alphabet,
  featureOptions: FeatureOptions,
): SpeechDataset {
  const count = parts.length;
  const frameOffsets = new Int32Array(count + 1);
  const labelOffsets = new Int32Array(count + 1);
  for (let i = 0; i < count; i++) {
    if (frameOffsets[i]! + parts[i]!.frames > 0x7fffffff)
      throw new Error(`${name}: more than 2³¹ frames in one dataset`);
    frameOffsets[i + 1] = frameOffsets[i]! + parts[i]!.frames;
    labelOffsets[i + 1] = labelOffsets[i]! + parts[i]!.labels.length;
  }
  const features = new Float32Array(frameOffsets[count]! * featureSize);
  const labels = new Int32Array(labelOffsets[count]!);
  const frames = new Int32Array(count);
  parts.forEach((p, i) => {
    features.set(p.features.subarray(0, p.frames * featureSize), frameOffsets[i]! * featureSize);
    labels.set(p.labels, labelOffsets[i]!);
    frames[i] = p.frames;
  });
  return {
    name,
    count,
    featureSize,
    context: featureOptions.context,
    features,
    frameOffsets,
    frames,
    labels,
    labelOffsets,
    sources: parts.map((p) => p.source),
    transcripts: parts.map((p) => p.transcript),
    alphabet,
    featureOptions,
  };
}

/** A copy whose big arrays live in SharedArrayBuffers, so worker threads share rather than copy them. */
export function shareSpeechDataset(ds: SpeechDataset): SpeechDataset {
  const share = <T extends Float32Array | Int32Array>(a: T, make: (b: SharedArrayBuffer) => T): T => {
    const out = make(new SharedArrayBuffer(a.byteLength));
    out.set(a);
    return out;
  };
  const f32 = (b: SharedArrayBuffer): Float32Array => new Float32Array(b);
  const i32 = (b: SharedArrayBuffer): Int32Array => new Int32Array(b);
  return {
    ...ds,
    features: share(ds.features, f32),
    frames: share(ds.frames, i32),
    frameOffsets: share(ds.frameOffsets, i32),
    labels: share(ds.labels, i32),
    labelOffsets: share(ds.labelOffsets, i32),
  };
}

/**
 * What processes of one job compare to be sure they read the same speech data (the counterpart of
 * data/fingerprint.ts): utterances, frames, feature size, context, alphabet, and a hash of all frame
 * counts and labels plus the first 16 utterances' features.
 */
export function speechDatasetFingerprint(ds: SpeechDataset): Record<string, string> {
  const n = Math.min(16, ds.count);
  const bytes = (a: Float32Array | Int32Array): Uint8Array => new Uint8Array(a.buffer, a.byteOffset, a.byteLength);
  const hash = createHash('sha256')
    .update(bytes(ds.frames))
    .update(bytes(ds.labels))
    .update(bytes(ds.features.subarray(0, ds.frameOffsets[n]! * ds.featureSize)));
  return {
    utterances: String(ds.count),
    frames: String(ds.frameOffsets[ds.count]),
    'feature size': `${ds.featureSize}×${2 * ds.context + 1}`,
    alphabet: ds.alphabet.symbols.join(''),
    'first utterances': `sha256:${hash.digest('hex').slice(0, 12)}`,
  };
}
