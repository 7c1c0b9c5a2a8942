import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { RealFft } from '../../src/speech/fft.ts';
import { dctMatrix, FoldedDct } from '../../src/speech/dct.ts';
import { FeatureExtractor } from '../../src/speech/features.ts';
import { frameGeometry, resolveFeatureOptions, type FeatureOptions } from '../../src/speech/featureOptions.ts';
import { readWav } from '../../src/speech/wav.ts';

const FIXTURES = fileURLToPath(new URL('./fixtures/', import.meta.url));

interface Fixture {
  configs: Record<string, Partial<FeatureOptions>>;
  signals: Record<string, Record<string, { frames: number; featureSize: number; data: number[] }>>;
}

test('the real FFT equals a direct DFT, and its power spectrum the squared magnitudes', () => {
  // radix-2 first pass (h = n/2 an odd power of two: 4, 16, 64, 1024) and radix-4 throughout (8, 32, 512, 2048)
  for (const n of [2, 4, 8, 16, 32, 64, 128, 512, 1024, 2048]) {
    const x = Array.from({ length: n }, (_, i) => Math.sin(i * 1.7) + 0.3 * Math.cos(i * i * 0.11));
    const re = new Float64Array(n / 2 + 1),
      im = new Float64Array(n / 2 + 1);
    new RealFft(n).transform(x, re, im);
    for (let k = 0; k <= n / 2; k++) {
      let dr = 0,
        di = 0;
      for (let t = 0; t < n; t++) {
        dr += x[t]! * Math.cos((-2 * Math.PI * k * t) / n);
        di += x[t]! * Math.sin((-2 * Math.PI * k * t) / n);
      }
      assert.ok(
        Math.abs(re[k]! - dr) < 1e-9 * n && Math.abs(im[k]! - di) < 1e-9 * n,
        `n=${n} k=${k}: ${re[k]},${im[k]} vs ${dr},${di}`,
      );
    }
    const power = new Float64Array(n / 2 + 1);
    new RealFft(n).powerSpectrum(x, power);
    for (let k = 0; k <= n / 2; k++) {
      const want = re[k]! ** 2 + im[k]! ** 2;
      assert.ok(Math.abs(power[k]! - want) <= 1e-12 * (1 + want), `n=${n} bin ${k}: ${power[k]} vs ${want}`);
    }
    // a frame at an offset, windowed as it is read, is the same as the windowed frame written out
    const signal = Array.from({ length: n + 7 }, (_, i) => Math.cos(i * 0.9) * 3);
    const window = Float64Array.from({ length: n }, (_, i) => 0.5 + 0.5 * Math.sin(i));
    const framed = Array.from({ length: n }, (_, t) => signal[5 + t]! * window[t]!);
    const direct = new Float64Array(n / 2 + 1),
      written = new Float64Array(n / 2 + 1);
    const fft = new RealFft(n);
    fft.powerSpectrum(signal, direct, 5, window);
    fft.powerSpectrum(framed, written);
    assert.deepEqual(direct, written, `n=${n}: windowed on reading`);
    assert.throws(() => fft.powerSpectrum(signal, direct, 8, window), /the frame is 8 …/);
  }
});

test('the folded DCT equals the matrix product, for even and odd input counts, with and without a scale', () => {
  for (const [count, n] of [
    [13, 23],
    [26, 40],
    [40, 40],
    [5, 7],
  ] as const) {
    const m = dctMatrix(count, n);
    const x = Float64Array.from({ length: n }, (_, j) => Math.sin(j * 1.3) * 10 + j * 0.1);
    const scale = Float64Array.from({ length: count }, (_, k) => 1 + 0.5 * k);
    for (const s of [undefined, scale]) {
      const out = new Float32Array(count + 3);
      new FoldedDct(count, n).apply(x, out, 3, s);
      for (let k = 0; k < count; k++) {
        let want = 0;
        for (let j = 0; j < n; j++) want += m[k * n + j]! * x[j]!;
        if (s) want *= s[k]!;
        assert.equal(out[3 + k], Math.fround(want), `count ${count}, n ${n}, coefficient ${k}`);
      }
    }
  }
});

test('the DCT-II matrix is orthonormal', () => {
  const n = 12,
    m = dctMatrix(n, n);
  for (let a = 0; a < n; a++)
    for (let b = 0; b < n; b++) {
      let s = 0;
      for (let j = 0; j < n; j++) s += m[a * n + j]! * m[b * n + j]!;
      assert.ok(Math.abs(s - (a === b ? 1 : 0)) < 1e-12);
    }
});

// tolerance: |ours − torchaudio| ≤ 2e-5 (values up to ~130; ours are float32, half an ulp at 128 is 7.6e-6;
// the fixture has 6 decimals; measured worst 7e-6)
test('log-mel and MFCC features equal torchaudio.compliance.kaldi on a chirp and an espeak-ng utterance', () => {
  const fixture = JSON.parse(readFileSync(`${FIXTURES}features.json`, 'utf8')) as Fixture;
  for (const [signal, results] of Object.entries(fixture.signals)) {
    for (const [name, ref] of Object.entries(results)) {
      const options = resolveFeatureOptions(fixture.configs[name]);
      const audio = readWav(`${FIXTURES}${signal}.wav`, options.sampleRate);
      const ours = new FeatureExtractor(options).compute(audio.samples);
      assert.equal(ours.frames, ref.frames, `${signal}/${name}: frames`);
      assert.equal(ours.featureSize, ref.featureSize, `${signal}/${name}: feature size`);
      for (let i = 0; i < ref.data.length; i++) {
        const err = Math.abs(ours.data[i]! - ref.data[i]!) / 2e-5;
        assert.ok(
          err <= 1,
          `${signal}/${name}: value ${i} (frame ${Math.floor(i / ref.featureSize)}) is ${ours.data[i]}, torchaudio ${ref.data[i]}`,
        );
      }
    }
  }
});

test('frame geometry: DeepSpeech 32 ms / 20 ms at 16 kHz is 512 / 320 samples, FFT 512; 25 ms → FFT 512', () => {
  assert.deepEqual(frameGeometry(resolveFeatureOptions()), {
    windowSize: 512,
    windowShift: 320,
    fftSize: 512,
    featureSize: 26,
  });
  assert.deepEqual(frameGeometry(resolveFeatureOptions({ windowMs: 25, stepMs: 10, type: 'logMel' })), {
    windowSize: 400,
    windowShift: 160,
    fftSize: 512,
    featureSize: 40,
  });
});

test('bad feature options are named', () => {
  assert.throws(
    () => resolveFeatureOptions({ coefficients: 50 }),
    /features\.coefficients: must be a whole number from 1 to melFilters \(40\)/,
  );
  assert.throws(() => resolveFeatureOptions({ highHz: 9000 }), /features\.highHz/);
  assert.throws(
    () => resolveFeatureOptions({ window: 'blackman' as never }),
    /features\.window: must be one of hann, hamming, povey, rectangular/,
  );
  assert.throws(() => resolveFeatureOptions({ windwoMs: 3 } as never), /features\.windwoMs: unknown option/);
  assert.throws(
    () => new FeatureExtractor(resolveFeatureOptions({ melFilters: 200, coefficients: 13, windowMs: 10 })),
    /filter \d+ covers no frequency bin/,
  );
});
