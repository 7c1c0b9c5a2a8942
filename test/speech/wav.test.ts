import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import wavefile from 'wavefile';
import { monoFromPcm } from '../../src/speech/pcm.ts';
import { decodeWav, readWav } from '../../src/speech/wav.ts';

const { WaveFile } = wavefile;

/** A test signal in [−0.9, 0.9]: two tones, distinct per channel. */
function signal(n: number, rate: number, channel = 0): Float64Array {
  const x = new Float64Array(n);
  for (let i = 0; i < n; i++)
    x[i] =
      0.6 * Math.sin((2 * Math.PI * (440 + 100 * channel) * i) / rate) +
      0.3 * Math.sin((2 * Math.PI * 1234 * i) / rate + channel);
  return x;
}

/** wavefile's integer/float sample values for [−1, 1] floats at a bit depth. */
function encode(x: Float64Array, bitDepth: string): number[] {
  if (bitDepth === '32f' || bitDepth === '64') return Array.from(x);
  const bits = Number(bitDepth);
  if (bits === 8) return Array.from(x, (v) => Math.round(v * 128) + 128);
  return Array.from(x, (v) => Math.round(v * 2 ** (bits - 1)));
}

test('PCM 8/16/24/32-bit and float 32/64-bit read back within quantisation, mono and stereo', () => {
  const rate = 16000,
    n = 800;
  for (const bitDepth of ['8', '16', '24', '32', '32f', '64']) {
    for (const channels of [1, 2]) {
      const lanes = Array.from({ length: channels }, (_, c) => signal(n, rate, c));
      const wav = new WaveFile();
      wav.fromScratch(
        channels,
        rate,
        bitDepth,
        channels === 1 ? encode(lanes[0]!, bitDepth) : lanes.map((l) => encode(l, bitDepth)),
      );
      const audio = decodeWav(wav.toBuffer(), `${bitDepth}-bit`);
      assert.equal(audio.samples.length, n);
      assert.equal(audio.channels, channels);
      assert.equal(audio.sampleRate, rate);
      const bits = bitDepth === '32f' ? 24 : bitDepth === '64' ? 24 : Number(bitDepth);
      const tol = 2 ** -(bits - 1) + 1e-7; // half a step per channel, plus float32 storage
      for (let i = 0; i < n; i++) {
        const want = lanes.reduce((a, l) => a + l[i]!, 0) / channels;
        assert.ok(
          Math.abs(audio.samples[i]! - want) <= tol,
          `${bitDepth}-bit ×${channels} sample ${i}: ${audio.samples[i]} vs ${want}`,
        );
      }
    }
  }
});

test("the direct PCM reader gives wavefile's own samples: every layout, 1–3 channels, RIFF and RIFX", () => {
  const n = 300;
  for (const container of ['RIFF', 'RIFX'] as const) {
    for (const bitDepth of ['8', '16', '24', '32', '32f', '64']) {
      for (const channels of [1, 2, 3]) {
        const lanes = Array.from({ length: channels }, (_, c) => encode(signal(n, 16000, c), bitDepth));
        const wav = new WaveFile();
        wav.fromScratch(channels, 16000, bitDepth, channels === 1 ? lanes[0]! : lanes, { container });
        const bytes = wav.toBuffer();
        const got = decodeWav(bytes, 'x').samples;
        // the reference: wavefile's unpacker, then the same offset, scale and mean
        const parsed = new WaveFile(bytes);
        const raw = parsed.getSamples(false, Float64Array) as unknown as Float64Array | Float64Array[];
        const ref = Array.isArray(raw) ? raw : [raw];
        const bits = Number(bitDepth.replace('f', ''));
        const [offset, scale] =
          bitDepth === '32f' || bitDepth === '64' ? [0, 1] : bits === 8 ? [128, 1 / 128] : [0, 2 ** -(bits - 1)];
        assert.equal(got.length, n, `${container} ${bitDepth}-bit ×${channels}: length`);
        for (let i = 0; i < n; i++) {
          let sum = 0;
          for (const lane of ref) sum += lane[i]! - offset;
          assert.equal(
            got[i],
            Math.fround(sum * (scale / channels)),
            `${container} ${bitDepth}-bit ×${channels} sample ${i}`,
          );
        }
      }
    }
  }
});

test('16-bit samples read the same from bytes at an odd offset (no typed-array view there) as at an even one', () => {
  const ints = Int16Array.from(encode(signal(200, 8000), '16'));
  const even = new Uint8Array(ints.buffer);
  const odd = new Uint8Array(even.length + 1).subarray(1);
  odd.set(even);
  assert.deepEqual(monoFromPcm(odd, 1, '16', false, 0, 2 ** -15), monoFromPcm(even, 1, '16', false, 0, 2 ** -15));
  assert.equal(monoFromPcm(even, 1, '16', false, 0, 2 ** -15)[7], ints[7]! / 32768);
});

test('µ-law and A-law are expanded, IMA ADPCM refused; a 32-bit float WAVE_FORMAT_EXTENSIBLE file is read as float', () => {
  const x = signal(400, 8000);
  for (const law of ['mu', 'a'] as const) {
    const wav = new WaveFile();
    wav.fromScratch(1, 8000, '16', encode(x, '16'));
    if (law === 'mu') wav.toMuLaw();
    else wav.toALaw();
    const audio = decodeWav(wav.toBuffer(), law);
    assert.equal(audio.samples.length, x.length);
    for (let i = 0; i < x.length; i++) assert.ok(Math.abs(audio.samples[i]! - x[i]!) < 0.04, `${law}-law sample ${i}`);
  }
  const adpcm = new WaveFile();
  adpcm.fromScratch(1, 8000, '16', encode(x, '16'));
  adpcm.toIMAADPCM();
  assert.throws(
    () => decodeWav(adpcm.toBuffer(), 'a.wav'),
    /a\.wav: IMA ADPCM WAV files are not supported; convert to 16-bit PCM/,
  );
  // hand-made extensible header: fmt chunk of 40 bytes, sub-format GUID 00000003-0000-0010-8000-00aa00389b71
  const samples = new Float32Array([0.5, -0.25, 0.125, 1]);
  const fmt = Buffer.alloc(48);
  fmt.write('fmt ', 0);
  fmt.writeUInt32LE(40, 4);
  fmt.writeUInt16LE(0xfffe, 8);
  fmt.writeUInt16LE(1, 10);
  fmt.writeUInt32LE(16000, 12);
  fmt.writeUInt32LE(64000, 16);
  fmt.writeUInt16LE(4, 20);
  fmt.writeUInt16LE(32, 22);
  fmt.writeUInt16LE(22, 24);
  fmt.writeUInt16LE(32, 26);
  fmt.writeUInt32LE(4, 28);
  Buffer.from([3, 0, 0, 0, 0, 0, 0x10, 0, 0x80, 0, 0, 0xaa, 0, 0x38, 0x9b, 0x71]).copy(fmt, 32);
  const data = Buffer.concat([Buffer.from('data'), Buffer.alloc(4), Buffer.from(samples.buffer)]);
  data.writeUInt32LE(16, 4);
  const riff = Buffer.concat([Buffer.from('RIFF'), Buffer.alloc(4), Buffer.from('WAVE'), fmt, data]);
  riff.writeUInt32LE(riff.length - 8, 4);
  assert.deepEqual(Array.from(decodeWav(riff, 'extensible').samples), [0.5, -0.25, 0.125, 1]);
});

test("a WAV file at another rate is resampled on reading: the tone's frequency and level kept, the duration too", () => {
  const amplitudeAt = (x: Float32Array, f: number, rate: number): number => {
    let c = 0,
      s = 0;
    const lo = 400,
      hi = x.length - 400;
    for (let i = lo; i < hi; i++) {
      c += x[i]! * Math.cos((2 * Math.PI * f * i) / rate);
      s += x[i]! * Math.sin((2 * Math.PI * f * i) / rate);
    }
    return (2 * Math.hypot(c, s)) / (hi - lo);
  };
  // test/speech/resample.test.ts checks the resampler itself: pass band, stop band, delay
  for (const from of [8000, 11025, 22050, 44100]) {
    const n = Math.round(from * 0.25);
    const tone = new Float64Array(n);
    for (let i = 0; i < n; i++) tone[i] = 0.5 * Math.sin((2 * Math.PI * 1000 * i) / from);
    const wav = new WaveFile();
    wav.fromScratch(1, from, '32f', Array.from(tone));
    const audio = decodeWav(wav.toBuffer(), `${from} Hz`, 16000);
    assert.equal(audio.sourceRate, from);
    assert.equal(audio.sampleRate, 16000);
    assert.equal(audio.samples.length, Math.ceil(n * (16000 / from)), `${from} Hz: length`);
    assert.ok(Math.abs(amplitudeAt(audio.samples, 1000, 16000) - 0.5) < 1e-3, `${from} Hz: the 1 kHz tone's amplitude`);
  }
});

test('a missing, non-WAV, truncated or empty file is one error naming it', () => {
  const dir = mkdtempSync(join(tmpdir(), 'paratrain-wav-'));
  try {
    assert.throws(
      () => readWav(join(dir, 'nope.wav'), 16000, 'nope.wav (train.csv:3)'),
      /^Error: nope\.wav \(train\.csv:3\): no such file$/,
    );
    writeFileSync(join(dir, 'text.wav'), 'wav_filename,wav_filesize,transcript\n');
    assert.throws(
      () => readWav(join(dir, 'text.wav')),
      /text\.wav: not a readable WAV file \(Not a supported format\)/,
    );
    const wav = new WaveFile();
    wav.fromScratch(1, 16000, '16', new Array(1000).fill(7));
    const bytes = wav.toBuffer();
    writeFileSync(join(dir, 'cut.wav'), bytes.subarray(0, 500));
    assert.throws(
      () => readWav(join(dir, 'cut.wav')),
      /cut\.wav: the WAV file is truncated: its data chunk declares 2000 bytes, 456 are present/,
    );
    const empty = new WaveFile();
    empty.fromScratch(1, 16000, '16', []);
    writeFileSync(join(dir, 'empty.wav'), empty.toBuffer());
    assert.throws(() => readWav(join(dir, 'empty.wav')), /empty\.wav: the WAV file holds no samples/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
