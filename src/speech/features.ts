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
import { FoldedDct } from './dct.ts';
import { RealFft } from './fft.ts';
import { frameGeometry, type FeatureOptions, type FrameGeometry } from './featureOptions.ts';
import { melFilterbank } from './melBank.ts';

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

/** The number of whole frames in `samples` samples. */
export function frameCount(samples: number, g: FrameGeometry): number {
  return samples < g.windowSize ? 0 : 1 + Math.floor((samples - g.windowSize) / g.windowShift);
}

/** Computes features for one option set; build once, call `compute` per utterance (not reentrant: buffers are reused). */
export class FeatureExtractor {
  readonly geometry: FrameGeometry;
  /** the window times SAMPLE_SCALE (a power of two, so this equals scaling first, bit for bit) */
  private readonly scaledWindow: Float64Array;
  private readonly fft: RealFft;
  /** the mel filters as one sparse matrix: filter m weighs bins melStart[m] … melStart[m] + its length − 1 */
  private readonly melStart: Int32Array;
  private readonly melOffset: Int32Array;
  private readonly melWeights: Float64Array;
  private readonly dct?: FoldedDct;
  private readonly lifter?: Float64Array;
  /** per-frame buffers: the frame zero-padded to the FFT size, its power spectrum, the log mel energies */
  private readonly frame: Float64Array;
  private readonly power: Float64Array;
  private readonly logMel: Float64Array;
  /** no mean removal, no pre-emphasis, no zero padding: the FFT reads and windows the samples itself */
  private readonly plainFrames: boolean;

  constructor(readonly options: FeatureOptions) {
    const g = frameGeometry(options);
    this.geometry = g;
    this.scaledWindow = windowFunction(options.window, g.windowSize).map((w) => w * SAMPLE_SCALE);
    const filters = melFilterbank(options.melFilters, g.fftSize, options.sampleRate, options.lowHz, options.highHz);
    this.melStart = Int32Array.from(filters, (f) => f.start);
    this.melOffset = new Int32Array(filters.length + 1);
    for (let m = 0; m < filters.length; m++) this.melOffset[m + 1] = this.melOffset[m]! + filters[m]!.weights.length;
    this.melWeights = new Float64Array(this.melOffset[filters.length]!);
    for (let m = 0; m < filters.length; m++) this.melWeights.set(filters[m]!.weights, this.melOffset[m]);
    this.fft = new RealFft(g.fftSize);
    if (options.type === 'mfcc') {
      this.dct = new FoldedDct(options.coefficients, options.melFilters);
      if (options.lifter > 0) {
        const L = options.lifter;
        this.lifter = new Float64Array(options.coefficients);
        for (let i = 0; i < options.coefficients; i++) this.lifter[i] = 1 + 0.5 * L * Math.sin((Math.PI * i) / L);
      }
    }
    this.frame = new Float64Array(g.fftSize);
    this.power = new Float64Array(g.fftSize / 2 + 1);
    this.logMel = new Float64Array(options.melFilters);
    this.plainFrames = options.preemphasis === 0 && !options.removeDcOffset && g.windowSize === g.fftSize;
  }

  /** Features of mono samples in [−1, 1] at options.sampleRate. */
  compute(samples: ArrayLike<number>): Features {
    const { windowShift, featureSize } = this.geometry;
    const frames = frameCount(samples.length, this.geometry);
    const out = new Float32Array(frames * featureSize);
    for (let f = 0; f < frames; f++) {
      if (this.plainFrames) this.fft.powerSpectrum(samples, this.power, f * windowShift, this.scaledWindow);
      else {
        this.windowFrame(samples, f * windowShift);
        this.fft.powerSpectrum(this.frame, this.power);
      }
      this.logMelEnergies();
      this.cepstra(out, f * featureSize);
    }
    return { data: out, frames, featureSize };
  }

  /** Steps 1–3: the frame at `start`, its mean removed, pre-emphasised, windowed and scaled into `frame`. */
  private windowFrame(samples: ArrayLike<number>, start: number): void {
    const { frame, scaledWindow } = this;
    const n = this.geometry.windowSize;
    const { preemphasis: p, removeDcOffset } = this.options;
    let mean = 0;
    if (removeDcOffset) {
      for (let t = 0; t < n; t++) mean += samples[start + t]!;
      mean /= n;
    }
    if (p === 0) {
      for (let t = 0; t < n; t++) frame[t] = (samples[start + t]! - mean) * scaledWindow[t]!;
      return;
    }
    let prev = samples[start]! - mean;
    frame[0] = (prev - p * prev) * scaledWindow[0]!;
    for (let t = 1; t < n; t++) {
      const x = samples[start + t]! - mean;
      frame[t] = (x - p * prev) * scaledWindow[t]!;
      prev = x;
    }
  }

  /** Step 4: the mel filterbank (a sparse matrix product) and the floored log. */
  private logMelEnergies(): void {
    const { power, logMel, melStart, melOffset, melWeights } = this;
    for (let m = 0; m < logMel.length; m++) {
      const end = melOffset[m + 1]!;
      let e = 0;
      for (let w = melOffset[m]!, k = melStart[m]!; w < end; w++, k++) e += melWeights[w]! * power[k]!;
      logMel[m] = Math.log(Math.max(e, LOG_FLOOR));
    }
  }

  /** Step 5: the DCT (dct.ts) and liftering for MFCC, or the log mel energies themselves. */
  private cepstra(out: Float32Array, row: number): void {
    const { logMel, dct } = this;
    if (dct) dct.apply(logMel, out, row, this.lifter);
    else for (let m = 0; m < logMel.length; m++) out[row + m] = logMel[m]!;
  }
}
