/**
 * The options of the acoustic features, their defaults (DeepSpeech's: 26 MFCC from 40 mel filters over a
 * 32 ms Hann window every 20 ms), their checks, the frame geometry they imply and the hash that keys the
 * feature cache. The definitions follow Kaldi's compute-fbank-feats / compute-mfcc-feats (as
 * torchaudio.compliance.kaldi implements them; docs/speech.md spells them out).
 */
import { createHash } from 'node:crypto';

/** Window shapes, Kaldi's definitions (`hann` is Kaldi's "hanning": symmetric, 0.5 − 0.5·cos(2πn/(N−1))). */
export const WINDOWS = ['hann', 'hamming', 'povey', 'rectangular'] as const;
export type WindowType = (typeof WINDOWS)[number];

/** What is computed per frame. */
export interface FeatureOptions {
  /** `mfcc`: cepstral coefficients; `logMel`: the log mel filterbank energies themselves */
  type: 'mfcc' | 'logMel';
  /** every file is resampled to this rate (Hz) first */
  sampleRate: number;
  /** analysis window length (ms); samples = ⌊rate · ms · 0.001⌋ */
  windowMs: number;
  /** hop between frames (ms) */
  stepMs: number;
  /** number of triangular mel filters */
  melFilters: number;
  /** MFCC: coefficients kept (c0 … c(n−1)); ignored for logMel */
  coefficients: number;
  window: WindowType;
  /** pre-emphasis coefficient in [0, 1]: y[t] = x[t] − p·x[t−1] within each frame; 0 turns it off */
  preemphasis: number;
  /** subtract each frame's mean before pre-emphasis and the window */
  removeDcOffset: boolean;
  /** lowest filter edge (Hz) */
  lowHz: number;
  /** highest filter edge (Hz); ≤ 0 means that much below the Nyquist frequency */
  highHz: number;
  /** MFCC liftering constant L: c_i · (1 + L/2 · sin(πi/L)); 0 turns it off */
  lifter: number;
  /** `utterance`: each coefficient to zero mean and unit variance over the utterance's frames */
  normalize: 'utterance' | 'none';
  /** context window: each frame is presented with ±context neighbours (zero-padded), stacked when batched */
  context: number;
}

/** DeepSpeech's features (its `n_input` 26, 32 ms / 20 ms, TensorFlow's 40 filters, Hann), no context. */
export const DEFAULT_FEATURE_OPTIONS: Readonly<FeatureOptions> = Object.freeze({
  type: 'mfcc',
  sampleRate: 16000,
  windowMs: 32,
  stepMs: 20,
  melFilters: 40,
  coefficients: 26,
  window: 'hann',
  preemphasis: 0,
  removeDcOffset: false,
  lowHz: 20,
  highHz: 0,
  lifter: 0,
  normalize: 'utterance',
  context: 0,
});

/** Bumped when the computation changes, so old caches stop matching (2: SpeexDSP's resampler). */
export const FEATURES_VERSION = 2;

/** Frame geometry: samples per window and per step, the FFT length (next power of two of the window). */
export interface FrameGeometry {
  windowSize: number;
  windowShift: number;
  fftSize: number;
  /** values per frame before context stacking */
  featureSize: number;
}

/** Same arithmetic as Kaldi/torchaudio: int(rate · ms · 0.001). */
export function msToSamples(rate: number, ms: number): number {
  return Math.trunc(rate * ms * 0.001);
}

export function nextPowerOfTwo(x: number): number {
  let p = 1;
  while (p < x) p *= 2;
  return p;
}

/**
 * Fills defaults and checks every field; errors name the field under `prefix` (e.g. `data.features`)
 * and say what is allowed.
 */
export function resolveFeatureOptions(partial: Partial<FeatureOptions> = {}, prefix = 'features'): FeatureOptions {
  const known = new Set(Object.keys(DEFAULT_FEATURE_OPTIONS));
  for (const key of Object.keys(partial)) {
    if (!known.has(key)) throw new Error(`${prefix}.${key}: unknown option; the options are ${[...known].join(', ')}`);
  }
  const o: FeatureOptions = { ...DEFAULT_FEATURE_OPTIONS };
  for (const [key, value] of Object.entries(partial))
    if (value !== undefined) (o as unknown as Record<string, unknown>)[key] = value;
  const bad = (field: string, want: string): never => {
    throw new Error(
      `${prefix}.${field}: ${want}, got ${JSON.stringify((o as unknown as Record<string, unknown>)[field])}`,
    );
  };
  if (o.type !== 'mfcc' && o.type !== 'logMel') bad('type', "must be 'mfcc' or 'logMel'");
  if (!Number.isInteger(o.sampleRate) || o.sampleRate < 1000) bad('sampleRate', 'must be a whole number of Hz ≥ 1000');
  if (!(typeof o.windowMs === 'number' && o.windowMs > 0)) bad('windowMs', 'must be a positive number of milliseconds');
  if (!(typeof o.stepMs === 'number' && o.stepMs > 0)) bad('stepMs', 'must be a positive number of milliseconds');
  if (!Number.isInteger(o.melFilters) || o.melFilters < 4) bad('melFilters', 'must be a whole number ≥ 4');
  if (!WINDOWS.includes(o.window)) bad('window', `must be one of ${WINDOWS.join(', ')}`);
  if (!(typeof o.preemphasis === 'number' && o.preemphasis >= 0 && o.preemphasis <= 1))
    bad('preemphasis', 'must be in [0, 1] (0: off)');
  if (typeof o.removeDcOffset !== 'boolean') bad('removeDcOffset', 'must be true or false');
  if (!(typeof o.lifter === 'number' && o.lifter >= 0)) bad('lifter', 'must be ≥ 0 (0: off)');
  if (o.normalize !== 'utterance' && o.normalize !== 'none') bad('normalize', "must be 'utterance' or 'none'");
  if (!Number.isInteger(o.context) || o.context < 0) bad('context', 'must be a whole number of frames ≥ 0');
  if (o.type === 'mfcc' && (!Number.isInteger(o.coefficients) || o.coefficients < 1 || o.coefficients > o.melFilters)) {
    bad('coefficients', `must be a whole number from 1 to melFilters (${o.melFilters})`);
  }
  const nyquist = o.sampleRate / 2;
  const high = o.highHz <= 0 ? o.highHz + nyquist : o.highHz;
  if (!(typeof o.lowHz === 'number' && o.lowHz >= 0 && o.lowHz < nyquist))
    bad('lowHz', `must be in [0, ${nyquist}) Hz (the Nyquist frequency at ${o.sampleRate} Hz)`);
  if (!(typeof o.highHz === 'number' && high > o.lowHz && high <= nyquist)) {
    bad(
      'highHz',
      `must lie above lowHz (${o.lowHz}) and at most ${nyquist} Hz; 0 or below counts down from the Nyquist frequency, giving ${high} Hz here`,
    );
  }
  const g = frameGeometry(o);
  if (g.windowSize < 2)
    bad('windowMs', `gives ${g.windowSize} samples at ${o.sampleRate} Hz; a window needs at least 2`);
  if (g.windowShift < 1) bad('stepMs', `gives ${g.windowShift} samples at ${o.sampleRate} Hz; a step needs at least 1`);
  return o;
}

export function frameGeometry(o: FeatureOptions): FrameGeometry {
  const windowSize = msToSamples(o.sampleRate, o.windowMs);
  return {
    windowSize,
    windowShift: msToSamples(o.sampleRate, o.stepMs),
    fftSize: Math.max(2, nextPowerOfTwo(windowSize)),
    featureSize: o.type === 'mfcc' ? o.coefficients : o.melFilters,
  };
}

/**
 * A hash of what changes the stored (un-normalised) features: every option but `normalize` and
 * `context`, which are applied after the cache, plus FEATURES_VERSION.
 */
export function featureOptionsHash(o: FeatureOptions): string {
  const { normalize: _n, context: _c, ...rest } = o;
  const fields = Object.keys(rest)
    .sort()
    .map((k) => [k, (rest as Record<string, unknown>)[k]]);
  const text = JSON.stringify({
    version: FEATURES_VERSION,
    fields: o.type === 'logMel' ? fields.filter(([k]) => k !== 'coefficients' && k !== 'lifter') : fields,
  });
  return createHash('sha256').update(text).digest('hex').slice(0, 16);
}
