/**
 * Loading a speech dataset directory (`data: { dataset: speech, dir: DIR }`): DIR/train.csv and
 * DIR/test.csv, and DIR/dev.csv when present (the validation set), in DeepSpeech's manifest format.
 *
 * In three phases, so bad input stops the load before anything is written: (1) every manifest is
 * read and checked (files exist, sizes, transcripts in the alphabet); (2) features are taken from the
 * cache or computed (WAV decoding errors surface here); (3) the caches are written.
 */
import { existsSync, statSync } from 'node:fs';
import { isAbsolute, join } from 'node:path';
import { DEFAULT_ALPHABET, readAlphabet, type Alphabet } from './alphabet.ts';
import { FeatureCache, defaultSpeechCacheDir } from './featureCache.ts';
import { featureOptionsHash, resolveFeatureOptions, type FeatureOptions } from './featureOptions.ts';
import { FeatureExtractor } from './features.ts';
import { readManifest, type ManifestEntry } from './manifest.ts';
import { normalizeUtterance } from './normalize.ts';
import { packSpeechDataset, utterance, type SpeechDataset } from './speechDataset.ts';
import { readWav } from './wav.ts';

export interface SpeechDataOptions {
  /** features (defaults: DEFAULT_FEATURE_OPTIONS, DeepSpeech's) */
  features?: Partial<FeatureOptions>;
  /** an alphabet file (DeepSpeech's alphabet.txt format); default: space, a–z, apostrophe */
  alphabet?: string;
  /** keep computed features in the cache (default true) */
  cache?: boolean;
  /** the cache directory (default defaultSpeechCacheDir(): $PARATRAIN_CACHE/speech-features or ~/.cache/paratrain/speech-features) */
  cacheDir?: string;
  /** the config field the feature options came from, for messages (default 'data.features') */
  featuresField?: string;
  /** progress and cache notes (default: none) */
  log?: (msg: string) => void;
}

export interface LoadedSpeechData {
  train: SpeechDataset;
  /** dev.csv, when the directory has one */
  validation?: SpeechDataset;
  test: SpeechDataset;
  /** where the data came from, for logs */
  source: string;
  alphabet: Alphabet;
  featureOptions: FeatureOptions;
}

/** Loads DIR/train.csv, DIR/test.csv and (when present) DIR/dev.csv. */
export function loadSpeechData(dir: string, options: SpeechDataOptions = {}): LoadedSpeechData {
  if (!existsSync(dir) || !statSync(dir).isDirectory()) {
    const where = isAbsolute(dir) ? '' : ` (relative to the working directory ${process.cwd()})`;
    throw new Error(
      `data.dir ${dir}${where}: no such directory; point data.dir or --data at a folder holding train.csv and test.csv (and optionally dev.csv), e.g. one made by scripts/make-speech-corpus.ts --out DIR`,
    );
  }
  for (const need of ['train.csv', 'test.csv']) {
    if (!existsSync(join(dir, need))) {
      throw new Error(
        `${dir}: no ${need}; a speech dataset directory holds train.csv and test.csv (and optionally dev.csv), each with the columns wav_filename,wav_filesize,transcript`,
      );
    }
  }
  const manifests = [
    { name: 'train', path: join(dir, 'train.csv') },
    { name: 'test', path: join(dir, 'test.csv') },
  ];
  if (existsSync(join(dir, 'dev.csv'))) manifests.push({ name: 'dev', path: join(dir, 'dev.csv') });
  const sets = loadSpeechManifests(manifests, options);
  const { alphabet, featureOptions } = sets[0]!;
  return {
    train: sets[0]!,
    test: sets[1]!,
    ...(sets[2] ? { validation: sets[2] } : {}),
    source: `${dir} (speech manifests: ${manifests.map((m) => `${m.name} ${sets.find((s) => s.name === m.name)!.count}`).join(', ')})`,
    alphabet,
    featureOptions,
  };
}

/** Loads manifests into datasets named as given; all are checked before any feature is computed. */
export function loadSpeechManifests(
  manifests: { name: string; path: string }[],
  options: SpeechDataOptions = {},
): SpeechDataset[] {
  const log = options.log ?? ((): void => {});
  const featureOptions = resolveFeatureOptions(options.features, options.featuresField ?? 'data.features');
  const alphabet = options.alphabet ? readAlphabet(options.alphabet) : DEFAULT_ALPHABET;
  const extractor = new FeatureExtractor(featureOptions);
  const { featureSize } = extractor.geometry;
  const hash = featureOptionsHash(featureOptions);
  // phase 1: every manifest checked
  const checked = manifests.map((m) => ({ ...m, entries: readManifest(m.path, alphabet) }));
  // phase 2: features
  const useCache = options.cache !== false;
  const cacheDir = options.cacheDir ?? defaultSpeechCacheDir();
  const caches: FeatureCache[] = [];
  const progress = {
    done: 0,
    total: checked.reduce((a, m) => a + m.entries.length, 0),
    computed: 0,
    lastLog: Date.now(),
  };
  const sets = checked.map(({ name, path, entries }) => {
    const cache = useCache
      ? new FeatureCache(FeatureCache.fileFor(cacheDir, path, hash), path, hash, featureSize)
      : undefined;
    if (cache) caches.push(cache);
    if (cache?.ignored) log(cache.ignored);
    const parts = entries.map((entry) => {
      let raw = cache?.get(entry);
      if (!raw) {
        raw = computeFeatures(entry, extractor);
        cache?.put(entry, raw);
        progress.computed++;
      }
      progress.done++;
      if (Date.now() - progress.lastLog > 10_000) {
        log(
          `speech features: ${progress.done} of ${progress.total} utterances (${progress.computed} computed, the rest cached)`,
        );
        progress.lastLog = Date.now();
      }
      return {
        features: raw,
        frames: raw.length / featureSize,
        labels: entry.labels,
        source: `${entry.where} (${entry.wavName})`,
        transcript: entry.transcript,
      };
    });
    // packing copies, so normalising the packed frames leaves the cached ones raw
    const ds = packSpeechDataset(name, parts, featureSize, alphabet, featureOptions);
    if (featureOptions.normalize === 'utterance') {
      for (let i = 0; i < ds.count; i++) {
        const { features, frames } = utterance(ds, i);
        normalizeUtterance(features, frames, featureSize);
      }
    }
    return ds;
  });
  // phase 3: caches, only once everything loaded
  for (const cache of caches) {
    const problem = cache.save();
    if (problem) log(problem);
  }
  if (progress.computed > 0)
    log(
      `speech features: computed ${progress.computed} of ${progress.total} utterances${useCache ? `, cached in ${cacheDir}` : ''}`,
    );
  return sets;
}

/** One manifest entry's raw (un-normalised) features, read and computed. */
function computeFeatures(entry: ManifestEntry, extractor: FeatureExtractor): Float32Array {
  const o = extractor.options;
  const audio = readWav(entry.path, o.sampleRate, `${entry.where}: ${entry.wavName}`);
  const { data, frames } = extractor.compute(audio.samples);
  if (frames === 0) {
    throw new Error(
      `${entry.where}: ${entry.wavName}: ${(audio.samples.length / o.sampleRate).toFixed(3)} s of audio is shorter than one ${o.windowMs} ms analysis window; remove the line or the file`,
    );
  }
  return data;
}
