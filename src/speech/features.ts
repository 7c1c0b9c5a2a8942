/**
 * Log-mel filterbank and MFCC features, Kaldi's definitions (compute-fbank-feats, compute-mfcc-feats,
 * as torchaudio.compliance.kaldi.fbank/mfcc with dither 0, snip_edges true, round_to_power_of_two
 * true, use_energy false). Per frame of `windowSize` samples every `windowShift`:
 *
 *   1. samples in 16-bit units (× 32768, as Kaldi reads WAV), the frame's mean removed if removeDcOffset;
 *   2. pre-emphasis y[t] = x[t] − p·x[t−1] (y[0] = x[0] − p·x[0]);
 *   3. the window, zero padding to fftSize (next power of two), power spectrum |X[k]|²;
 *   4. the mel filterbank (melBank.ts), log(max(e, ε)) with ε = 2⁻²³ (float32's machine epsilon);
 *   5. MFCC only: orthonormal DCT-II of the log energies, the first `coefficients` kept, liftering.
 *
 * Frames: only those that fit wholly in the signal, 1 + ⌊(n − windowSize)/windowShift⌋ (0 when shorter
 * than a window). Computed in float64, stored as float32.
 */
import { RealFft } from './fft.ts';
import { frameGeometry, type FeatureOptions, type FrameGeometry } from './featureOptions.ts';
import { melFilterbank, type MelFilter } from './melBank.ts';

/** Kaldi's floor inside the log: std::numeric_limits<float>::epsilon(). */
export const LOG_FLOOR = 2 ** -23;

/** Kaldi reads 16-bit WAV samples as integers; features of [−1, 1) samples scaled by this match it. */
export const SAMPLE_SCALE = 32768;

/** Features of one utterance: `frames` rows of `featureSize` values, row-major. */
export interface Features {
  data: Float32Array;
  frames: number;
  featureSize: number;
}

/** Kaldi's window functions (symmetric: the denominator is N − 1). */
export function windowFunction(type: FeatureOptions['window'], n: number): Float64Array {
  const w = new Float64Array(n);
  const a = (2 * Math.PI) / (n - 1);
  for (let i = 0; i < n; i++) {
    const hann = 0.5 - 0.5 * Math.cos(a * i);
    w[i] =
      type === 'hann' ? hann : type === 'hamming' ? 0.54 - 0.46 * Math.cos(a * i) : type === 'povey' ? hann ** 0.85 : 1;
  }
  return w;
}

/** The orthonormal DCT-II rows k < count for n inputs: s_k·cos(πk(j + ½)/n), s_0 = √(1/n), s_k = √(2/n). */
export function dctMatrix(count: number, n: number): Float64Array {
  const m = new Float64Array(count * n);
  for (let k = 0; k < count; k++) {
    const s = Math.sqrt((k === 0 ? 1 : 2) / n);
    for (let j = 0; j < n; j++) m[k * n + j] = s * Math.cos((Math.PI * k * (j + 0.5)) / n);
  }
  return m;
}

/** The number of whole frames in `samples` samples. */
export function frameCount(samples: number, g: FrameGeometry): number {
  return samples < g.windowSize ? 0 : 1 + Math.floor((samples - g.windowSize) / g.windowShift);
}

/** Computes features for one option set; build once, call `compute` per utterance. */
export class FeatureExtractor {
  readonly geometry: FrameGeometry;
  private readonly window: Float64Array;
  private readonly filters: MelFilter[];
  private readonly fft: RealFft;
  private readonly dct?: Float64Array;
  private readonly lifter?: Float64Array;

  constructor(readonly options: FeatureOptions) {
    const g = frameGeometry(options);
    this.geometry = g;
    this.window = windowFunction(options.window, g.windowSize);
    this.filters = melFilterbank(options.melFilters, g.fftSize, options.sampleRate, options.lowHz, options.highHz);
    this.fft = new RealFft(g.fftSize);
    if (options.type === 'mfcc') {
      this.dct = dctMatrix(options.coefficients, options.melFilters);
      if (options.lifter > 0) {
        const L = options.lifter;
        this.lifter = new Float64Array(options.coefficients);
        for (let i = 0; i < options.coefficients; i++) this.lifter[i] = 1 + 0.5 * L * Math.sin((Math.PI * i) / L);
      }
    }
  }

  /** Features of mono samples in [−1, 1] at options.sampleRate. */
  compute(samples: ArrayLike<number>): Features {
    const { windowSize, windowShift, fftSize, featureSize } = this.geometry;
    const { preemphasis, removeDcOffset, melFilters } = this.options;
    const frames = frameCount(samples.length, this.geometry);
    const out = new Float32Array(frames * featureSize);
    const frame = new Float64Array(fftSize);
    const power = new Float64Array(fftSize / 2 + 1);
    const re = new Float64Array(fftSize / 2 + 1),
      im = new Float64Array(fftSize / 2 + 1);
    const logMel = new Float64Array(melFilters);
    for (let f = 0; f < frames; f++) {
      const start = f * windowShift;
      let mean = 0;
      for (let t = 0; t < windowSize; t++) {
        const v = samples[start + t]! * SAMPLE_SCALE;
        frame[t] = v;
        mean += v;
      }
      if (removeDcOffset) {
        mean /= windowSize;
        for (let t = 0; t < windowSize; t++) frame[t] = frame[t]! - mean;
      }
      if (preemphasis !== 0) {
        for (let t = windowSize - 1; t > 0; t--) frame[t] = frame[t]! - preemphasis * frame[t - 1]!;
        frame[0] = frame[0]! - preemphasis * frame[0]!;
      }
      for (let t = 0; t < windowSize; t++) frame[t] = frame[t]! * this.window[t]!;
      frame.fill(0, windowSize);
      this.fft.powerSpectrum(frame, power, re, im);
      for (let m = 0; m < melFilters; m++) {
        const { start: s, weights } = this.filters[m]!;
        let e = 0;
        for (let k = 0; k < weights.length; k++) e += weights[k]! * power[s + k]!;
        logMel[m] = Math.log(Math.max(e, LOG_FLOOR));
      }
      const row = f * featureSize;
      if (!this.dct) {
        for (let m = 0; m < melFilters; m++) out[row + m] = logMel[m]!;
        continue;
      }
      for (let k = 0; k < featureSize; k++) {
        let c = 0;
        const base = k * melFilters;
        for (let m = 0; m < melFilters; m++) c += this.dct[base + m]! * logMel[m]!;
        out[row + k] = this.lifter ? c * this.lifter[k]! : c;
      }
    }
    return { data: out, frames, featureSize };
  }
}
