/**
 * Sample-rate conversion with wavefile's resampler (https://github.com/rochars/wavefile, MIT).
 *
 * Method: windowed-sinc interpolation with wavefile's anti-aliasing filter, a Butterworth IIR low-pass
 * at the lower of the two Nyquist frequencies run forwards and backwards (zero phase) — the `sinc`
 * method with `LPF: true, LPFType: 'IIR'`, the best of wavefile's four methods on these measurements
 * (pure tones; test/speech/wav.test.ts checks level, pitch, length and the removal of a 9 kHz tone):
 * downsampling to 16 kHz keeps a tone below 0.75 × the new Nyquist frequency within 0.2 dB from
 * 44.1/48 kHz (1.4 dB at 7.2 kHz from 22.05 kHz), is −3 dB at the Nyquist frequency, −40 dB at 1.06 ×
 * and below −80 dB from 1.125 × it; upsampling 8 → 16 kHz leaves the image of a 3 kHz tone 80 dB down
 * (the tone itself −2.8 dB, near the old Nyquist frequency). It costs about 0.1 s of CPU per second of
 * audio: resample a large corpus once (e.g. with sox) rather than every run; the feature cache keeps
 * the features either way.
 */
import wavefile from 'wavefile';

const { WaveFile } = wavefile;

/** The options given to wavefile's `toSampleRate` (named here so docs and tests can show them). */
export const RESAMPLE_OPTIONS = { method: 'sinc', LPF: true, LPFType: 'IIR' } as const;

/**
 * `samples` (mono, any scale) from `fromRate` to `toRate` Hz; the same array when the rates are equal.
 * The output has ⌊n · toRate / fromRate⌋ samples (± 1 from rounding).
 */
export function resample(samples: Float64Array, fromRate: number, toRate: number): Float64Array {
  if (!(fromRate > 0) || !(toRate > 0))
    throw new Error(`resample: sample rates must be positive, got ${fromRate} → ${toRate} Hz`);
  if (fromRate === toRate || samples.length === 0) return samples;
  // a 64-bit float container keeps the samples exact on the way through wavefile
  const wav = new WaveFile();
  wav.fromScratch(1, fromRate, '64', samples);
  wav.toSampleRate(toRate, { ...RESAMPLE_OPTIONS });
  return wav.getSamples(false, Float64Array) as unknown as Float64Array;
}
