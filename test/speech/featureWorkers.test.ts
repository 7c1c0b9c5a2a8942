import { test } from 'node:test';
import assert from 'node:assert/strict';
import { rmSync, writeFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { join } from 'node:path';
import wavefile from 'wavefile';
import { resolveFeatureOptions } from '../../src/speech/featureOptions.ts';
import { FeatureExtractor } from '../../src/speech/features.ts';
import {
  computeFeatures,
  FeaturePool,
  featureThreads,
  UTTERANCES_PER_THREAD,
} from '../../src/speech/featureWorkers.ts';
import { loadSpeechData } from '../../src/speech/speechData.ts';
import { csv, tmpDir, toneWav, writeTree } from './helpers.ts';

/** A stereo 22.05 kHz WAV (resampled and downmixed on the way in). */
function stereoWav(seconds: number, seed: number): Uint8Array {
  const rate = 22050,
    n = Math.round(seconds * rate);
  const lane = (c: number) =>
    Array.from({ length: n }, (_, i) =>
      Math.round(9000 * Math.sin((2 * Math.PI * (200 + 53 * seed + 40 * c) * i) / rate)),
    );
  const wav = new wavefile.WaveFile();
  wav.fromScratch(2, rate, '16', [lane(0), lane(1)]);
  return wav.toBuffer();
}

/** 14 utterances: 8 kHz (resampled to 16 kHz), 16 kHz, and stereo 22.05 kHz files. */
function makeSet(): string {
  const dir = tmpDir();
  const files: Record<string, string | Uint8Array> = {};
  const rows: [string, string][] = [];
  for (let i = 0; i < 14; i++) {
    const name = `wavs/${i}.wav`;
    files[name] =
      i % 3 === 0 ? toneWav(0.3 + 0.05 * i, i, 8000) : i % 3 === 1 ? toneWav(0.25 + 0.03 * i, i) : stereoWav(0.4, i);
    rows.push([name, i % 2 ? 'yes' : 'no']);
  }
  writeTree(dir, { ...files, 'train.csv': csv(rows.slice(0, 10)), 'test.csv': csv(rows.slice(10)) });
  return dir;
}

test('features computed on worker threads equal those computed on the calling thread, bit for bit', async () => {
  const dir = makeSet();
  try {
    const logs: string[] = [];
    const serial = await loadSpeechData(dir, { cache: false, threads: 1 });
    const parallel = await loadSpeechData(dir, { cache: false, threads: 3, log: (m) => logs.push(m) });
    assert.match(logs.at(-1)!, /computed 14 of 14 utterances on 3 threads/);
    for (const split of ['train', 'test'] as const) {
      assert.equal(parallel[split].count, serial[split].count);
      assert.deepEqual(parallel[split].frames, serial[split].frames);
      assert.deepEqual(parallel[split].features, serial[split].features);
    }
    // a warm pool gives the same again, and a cache filled by workers reads back the same
    const cacheDir = join(dir, 'cache');
    await loadSpeechData(dir, { cacheDir, threads: 2 });
    const cached = await loadSpeechData(dir, { cacheDir, threads: 2, log: (m) => logs.push(m) });
    assert.deepEqual(cached.train.features, serial.train.features);
    const pool = new FeaturePool(resolveFeatureOptions(), 2);
    try {
      const jobs = Array.from({ length: 14 }, (_, i) => ({ path: join(dir, `wavs/${i}.wav`), name: `${i}.wav` }));
      const a = await pool.compute(jobs);
      const b = await pool.compute(jobs.slice(5));
      assert.deepEqual(b, a.slice(5));
      assert.deepEqual(a, await computeFeatures(jobs, new FeatureExtractor(resolveFeatureOptions()), 1));
    } finally {
      await pool.close();
    }
    await assert.rejects(() => pool.compute([]), /FeaturePool: the pool is closed/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('on worker threads the error is the one computing in order stops at: the first bad file', async () => {
  const dir = makeSet();
  try {
    writeFileSync(join(dir, 'wavs/4.wav'), 'not audio');
    writeTree(dir, { 'wavs/9.wav': toneWav(0.01, 9) });
    const jobs = Array.from({ length: 14 }, (_, i) => ({
      path: join(dir, `wavs/${i}.wav`),
      name: `train.csv:${i + 2}`,
    }));
    const extractor = new FeatureExtractor(resolveFeatureOptions());
    const serial = await computeFeatures(jobs, extractor, 1).then(
      () => assert.fail('a bad file was read'),
      (e: Error) => e.message,
    );
    assert.match(serial, /^train\.csv:6: not a readable WAV file/);
    // two workers, two batches each in flight (0–3 and 8–9, 4–7 and 10–11): two fail, the lower index is reported
    await assert.rejects(
      () => computeFeatures(jobs, extractor, 2),
      (e: Error) => e.message === serial,
    );
    // the later bad file alone: its own error
    await assert.rejects(
      () => computeFeatures(jobs.slice(5), extractor, 3),
      /^Error: train\.csv:11: 0\.010 s of audio is shorter than one 32 ms analysis window/,
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('thread counts: as asked (capped at the utterances), else the cores for enough utterances', () => {
  assert.equal(featureThreads(4, 3), 3);
  assert.equal(featureThreads(1, 5000), 1);
  // automatic: every core, but at least UTTERANCES_PER_THREAD utterances each
  assert.equal(featureThreads(undefined, 10), 1);
  assert.equal(featureThreads(undefined, 2 * UTTERANCES_PER_THREAD), Math.min(availableParallelism(), 2));
  assert.equal(featureThreads(undefined, 1000 * UTTERANCES_PER_THREAD), availableParallelism());
  assert.throws(() => featureThreads(0, 10), /threads: must be a whole number of threads ≥ 1/);
  assert.throws(() => featureThreads(1.5, 10, 'data.threads'), /data\.threads: must be a whole number/);
});
