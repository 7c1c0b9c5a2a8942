import { test } from 'node:test';
import assert from 'node:assert/strict';
import { resample, resampledLength } from '../../src/speech/resample.ts';

/** `seconds` of a sine of amplitude 0.5 at `f` Hz, sampled at `rate`. */
function tone(f: number, rate: number, seconds = 0.5): Float32Array {
  const x = new Float32Array(Math.round(rate * seconds));
  for (let i = 0; i < x.length; i++) x[i] = 0.5 * Math.sin((2 * Math.PI * f * i) / rate);
  return x;
}

/** Samples kept clear of each end, where a filter sees the signal start or stop. */
const EDGE = 1000;

/** The amplitude of the component at `f` Hz (a least-squares sine fit away from the ends). */
function amplitudeAt(x: Float32Array, f: number, rate: number): number {
  let c = 0,
    s = 0;
  for (let i = EDGE; i < x.length - EDGE; i++) {
    c += x[i]! * Math.cos((2 * Math.PI * f * i) / rate);
    s += x[i]! * Math.sin((2 * Math.PI * f * i) / rate);
  }
  return (2 * Math.hypot(c, s)) / (x.length - 2 * EDGE);
}

/** The level of what is left, in dB relative to a sine of amplitude 0.5. */
function levelDb(x: Float32Array): number {
  let sum = 0;
  for (let i = EDGE; i < x.length - EDGE; i++) sum += x[i]! ** 2;
  return 20 * Math.log10(Math.sqrt(sum / (x.length - 2 * EDGE)) / (0.5 / Math.SQRT2));
}

const db = (amplitude: number) => 20 * Math.log10(amplitude / 0.5);

test('a resampled tone keeps its level, pitch and phase (no delay) and the input duration', () => {
  for (const [from, to] of [
    [8000, 16000],
    [11025, 16000],
    [22050, 16000],
    [44100, 16000],
    [48000, 16000],
    [16000, 8000],
  ] as const) {
    const x = tone(1000, from);
    const y = resample(x, from, to);
    assert.equal(y.length, Math.ceil((x.length * to) / from), `${from} → ${to}: length`);
    assert.equal(y.length, resampledLength(x.length, from, to));
    // the output sample i is the input's sine at time i / to: any delay or pitch change shows here
    let worst = 0;
    for (let i = EDGE; i < y.length - EDGE; i++)
      worst = Math.max(worst, Math.abs(y[i]! - 0.5 * Math.sin((2 * Math.PI * 1000 * i) / to)));
    // measured ≤ 4·10⁻⁶ (float32 output, the filter's pass-band ripple)
    assert.ok(worst < 1e-4, `${from} → ${to}: off the ideal sine by ${worst}`);
  }
});

test('the pass band is flat to 0.9 × the lower Nyquist frequency; what the new rate cannot hold is removed', () => {
  // 8 → 16 kHz: a 3.6 kHz tone (0.9 × 4 kHz) within 0.3 dB, its image at 4.4 kHz at least 90 dB down
  const up = resample(tone(3600, 8000), 8000, 16000);
  assert.ok(Math.abs(db(amplitudeAt(up, 3600, 16000))) < 0.3, `3.6 kHz at ${db(amplitudeAt(up, 3600, 16000))} dB`);
  assert.ok(db(amplitudeAt(up, 4400, 16000)) < -90, `image at ${db(amplitudeAt(up, 4400, 16000))} dB`);
  // 22.05 → 16 kHz: 7.2 kHz (0.9 × 8 kHz) within 0.3 dB
  const kept = resample(tone(7200, 22050), 22050, 16000);
  assert.ok(Math.abs(db(amplitudeAt(kept, 7200, 16000))) < 0.3, `7.2 kHz at ${db(amplitudeAt(kept, 7200, 16000))} dB`);
  // above the new Nyquist frequency: at least 90 dB down, not folded back (the old resampler left 8.5 kHz at −40 dB)
  for (const [f, from] of [
    [8500, 22050],
    [9000, 22050],
    [8500, 44100],
    [9000, 44100],
    [12000, 44100],
    [20000, 44100],
  ] as const) {
    const level = levelDb(resample(tone(f, from), from, 16000));
    assert.ok(level < -90, `${f} Hz from ${from} Hz: ${level.toFixed(1)} dB after resampling to 16 kHz`);
  }
});

test('every length and rate pair gives ⌈n · to / from⌉ samples (the filter is flushed to the end)', () => {
  for (const [from, to] of [
    [48000, 8000],
    [8000, 44100],
    [12345, 16000],
    [16000, 22050],
    [96000, 16000],
    [16000, 11025],
  ] as const) {
    for (let n = 1; n < 3000; n += 97)
      assert.equal(
        resample(new Float32Array(n).fill(0.1), from, to).length,
        Math.ceil((n * to) / from),
        `${n} samples ${from} → ${to}`,
      );
  }
});

test('equal rates and no samples pass through; rates that are not positive whole numbers are refused', () => {
  const x = tone(440, 16000, 0.01);
  assert.equal(resample(x, 16000, 16000), x);
  assert.equal(resample(new Float32Array(0), 8000, 16000).length, 0);
  assert.equal(resample(new Float32Array(1), 8000, 16000).length, 2);
  assert.throws(
    () => resample(x, 0, 16000),
    /resample: sample rates must be positive whole numbers of Hz, got 0 → 16000/,
  );
  assert.throws(() => resample(x, 8000.5, 16000), /8000\.5 → 16000 Hz/);
});
