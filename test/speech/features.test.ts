import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { RealFft } from '../../src/speech/fft.ts';
import { FeatureExtractor, dctMatrix } from '../../src/speech/features.ts';
import { frameGeometry, resolveFeatureOptions, type FeatureOptions } from '../../src/speech/featureOptions.ts';
import { readWav } from '../../src/speech/wav.ts';

const FIXTURES = fileURLToPath(new URL('./fixtures/', import.meta.url));

interface Fixture {
  configs: Record<string, Partial<FeatureOptions>>;
  signals: Record<string, Record<string, { frames: number; featureSize: number; data: number[] }>>;
}

test('the real FFT equals a direct DFT', () => {
  for (const n of [2, 4, 8, 64, 512]) {
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
