/**
 * Loading a speech dataset directory (`data: { dataset: speech, dir: DIR }`): DIR/train.csv and
 * DIR/test.csv, and DIR/dev.csv when present (the validation set), in DeepSpeech's manifest format.
 *
 * In three phases, so bad input stops the load before anything is written: (1) every manifest is
 * read and checked (files exist, sizes, transcripts in the alphabet); (2) features are taken from the
 * cache, and the rest computed on worker threads (featureWorkers.ts; WAV decoding errors surface
 * here); (3) the caches are written.
 */
import { existsSync, statSync } from 'node:fs';
import { isAbsolute, join } from 'node:path';
import { DEFAULT_ALPHABET, readAlphabet, type Alphabet } from './alphabet.ts';
import { FeatureCache, defaultSpeechCacheDir } from './featureCache.ts';
import { featureOptionsHash, resolveFeatureOptions, type FeatureOptions } from './featureOptions.ts';
import { FeatureExtractor } from './features.ts';
import { computeFeatures, featureThreads } from './featureWorkers.ts';
import { readManifest } from './manifest.ts';
import { normalizeUtterance } from './normalize.ts';
import { packSpeechDataset, utterance, type SpeechDataset } from './speechDataset.ts';

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
  /**
   * threads computing the features the cache does not hold (default: every core, fewer for under
   * 500 utterances a thread; 1 computes on the calling thread). The values are the same either way.
   */
  threads?: number;
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
export async function loadSpeechData(dir: string, options: SpeechDataOptions = {}): Promise<LoadedSpeechData> {
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
  const sets = await loadSpeechManifests(manifests, options);
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
export async function loadSpeechManifests(
  manifests: { name: string; path: string }[],
  options: SpeechDataOptions = {},
): Promise<SpeechDataset[]> {
  const log = options.log ?? ((): void => {});
  const featureOptions = resolveFeatureOptions(options.features, options.featuresField ?? 'data.features');
  const alphabet = options.alphabet ? readAlphabet(options.alphabet) : DEFAULT_ALPHABET;
  // made first: options that give an empty mel filter fail before any file is read
  const extractor = new FeatureExtractor(featureOptions);
  const { featureSize } = extractor.geometry;
  const hash = featureOptionsHash(featureOptions);
  // phase 1: every manifest checked
  const checked = manifests.map((m) => ({ ...m, entries: readManifest(m.path, alphabet) }));
  // phase 2: features from the caches, then the rest computed (on every core when there are many)
  const useCache = options.cache !== false;
  const cacheDir = options.cacheDir ?? defaultSpeechCacheDir();
  const caches = checked.map(({ path }) => {
    const cache = useCache
      ? new FeatureCache(FeatureCache.fileFor(cacheDir, path, hash), path, hash, featureSize)
      : undefined;
    if (cache?.ignored) log(cache.ignored);
    return cache;
  });
  const raw = checked.map(({ entries }, m) => entries.map((entry) => caches[m]?.get(entry)));
  const missing: { m: number; i: number }[] = [];
  raw.forEach((list, m) => {
    list.forEach((data, i) => {
      if (!data) missing.push({ m, i });
    });
  });
  const total = raw.reduce((a, list) => a + list.length, 0);
  const threads = featureThreads(options.threads, missing.length, 'threads');
  let lastLog = Date.now();
  const computed = await computeFeatures(
    missing.map(({ m, i }) => {
      const entry = checked[m]!.entries[i]!;
      return { path: entry.path, name: `${entry.where}: ${entry.wavName}` };
    }),
    extractor,
    threads,
    (done) => {
      if (Date.now() - lastLog > 10_000) {
        log(
          `speech features: ${total - missing.length + done} of ${total} utterances (${done} computed, the rest cached)`,
        );
        lastLog = Date.now();
      }
    },
  );
  missing.forEach(({ m, i }, k) => {
    raw[m]![i] = computed[k]!;
    caches[m]?.put(checked[m]!.entries[i]!, computed[k]!);
  });
  const sets = checked.map(({ name, entries }, m) => {
    const parts = entries.map((entry, i) => {
      const features = raw[m]![i]!;
      return {
        features,
        frames: features.length / featureSize,
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
    const problem = cache?.save();
    if (problem) log(problem);
  }
  if (missing.length > 0)
    log(
      `speech features: computed ${missing.length} of ${total} utterances${threads > 1 ? ` on ${threads} threads` : ''}${useCache ? `, cached in ${cacheDir}` : ''}`,
    );
  return sets;
}
