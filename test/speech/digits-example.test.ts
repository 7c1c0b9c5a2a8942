/**
 * The shipped digits corpus (data/speech-digits) and the example that trains on it
 * (examples/deepspeech-digits.yaml): the manifests, the speaker split, the plan that made it, and
 * one short epoch of the example's own recipe.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { loadConfig, parseConfig, parseYaml } from '../../src/config/index.ts';
import { planUtterance } from '../../src/speech/corpusPlan.ts';
import { DEFAULT_ALPHABET } from '../../src/speech/alphabet.ts';
import { readManifest } from '../../src/speech/manifest.ts';
import { decodeWav } from '../../src/speech/wav.ts';
import { train } from '../../src/runtime/run/train.ts';
import { REPO } from '../cli/helpers.ts';
import { tmpDir } from './helpers.ts';

const DIGITS_DIR = join(REPO, 'data/speech-digits');
const EXAMPLE = join(REPO, 'examples/deepspeech-digits.yaml');

test('the shipped data/speech-digits: digit transcripts, 8 kHz µ-law, no test or dev speaker in training', () => {
  const counts = Object.fromEntries(
    (['train', 'dev', 'test'] as const).map((s) => [
      s,
      readManifest(join(DIGITS_DIR, `${s}.csv`), DEFAULT_ALPHABET).length,
    ]),
  );
  assert.deepEqual(counts, { train: 1052, dev: 161, test: 187 });
  const rows = readFileSync(join(DIGITS_DIR, 'utterances.csv'), 'utf8')
    .trim()
    .split('\n')
    .slice(1)
    .map((l) => l.split(','));
  assert.equal(rows.length, 1400);
  const digit =
    /^(zero|one|two|three|four|five|six|seven|eight|nine)( (zero|one|two|three|four|five|six|seven|eight|nine)){0,2}$/;
  for (const r of rows) assert.match(r[8]!, digit);
  const speakers = (split: string): Set<string> =>
    new Set(rows.filter((r) => r[1] === split).map((r) => r[2]!.split('+')[1] ?? ''));
  const train = speakers('train');
  for (const s of [...speakers('dev'), ...speakers('test')])
    assert.ok(!train.has(s), `speaker ${s} is also in training`);
  // the plan reproduces the shipped corpus's choices
  for (const r of rows.slice(0, 20)) {
    const p = planUtterance(Number(r[0]!.slice(5, 11)), { seed: 1, minWords: 1, maxWords: 3, vocabulary: 'digits' });
    assert.deepEqual(
      [p.split, p.voice, String(p.rate), String(p.pitch), p.words.join(' ')],
      [r[1], r[2], r[3], r[4], r[8]],
    );
  }
  const wav = readFileSync(join(DIGITS_DIR, rows[0]![0]!));
  assert.equal(wav.readUInt16LE(20), 7, 'WAVE_FORMAT_MULAW');
  assert.equal(decodeWav(wav, rows[0]![0]!).sampleRate, 8000);
});

test('examples/deepspeech-digits.yaml loads and trains one short epoch on the shipped corpus', {
  timeout: 120_000,
}, async () => {
  assert.equal(loadConfig(EXAMPLE).data.dataset, 'speech');
  const dir = tmpDir();
  // the example's recipe, cut to one epoch on a few utterances
  const raw = parseYaml(readFileSync(EXAMPLE, 'utf8'), EXAMPLE) as {
    data: Record<string, unknown>;
    train: Record<string, unknown>;
  };
  raw.data = { ...raw.data, dir: DIGITS_DIR, trainLimit: 32, testLimit: 8, cacheDir: join(dir, 'cache') };
  raw.train = { ...raw.train, epochs: 1 };
  const result = await train(parseConfig(raw), { out: join(dir, 'run') });
  assert.ok(Number.isFinite(result.testCER) && result.testCER! >= 0, `testCER ${result.testCER}`);
  assert.ok(Number.isFinite(result.testWER) && result.testWER! >= 0, `testWER ${result.testWER}`);
});
