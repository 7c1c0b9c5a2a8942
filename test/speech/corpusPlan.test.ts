import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { alphabetIndex, DEFAULT_ALPHABET, encodeTranscript } from '../../src/speech/alphabet.ts';
import { readManifest } from '../../src/speech/manifest.ts';
import { planUtterance, renderUtterance, SPEAKERS, voicesOf } from '../../src/speech/corpusPlan.ts';

test('the corpus plan is deterministic, spelled in the default alphabet, and its test speakers never train', () => {
  const plans = Array.from({ length: 2000 }, (_, i) => planUtterance(i, { seed: 3 }));
  assert.deepEqual(planUtterance(17, { seed: 3 }), plans[17]);
  assert.notDeepEqual(planUtterance(17, { seed: 4 }), plans[17]);
  const speakerOf = (voice: string): string => voice.split('+')[1] ?? '';
  const bySplit = { train: new Set<string>(), dev: new Set<string>(), test: new Set<string>() };
  const index = alphabetIndex(DEFAULT_ALPHABET);
  for (const p of plans) {
    bySplit[p.split].add(speakerOf(p.voice));
    assert.ok(voicesOf(p.split).includes(p.voice));
    assert.ok(p.words.length >= 1 && p.words.length <= 5);
    encodeTranscript(p.words.join(' '), index, DEFAULT_ALPHABET, `utterance ${p.index}`);
  }
  for (const s of bySplit.test) assert.ok(!bySplit.train.has(s) && !bySplit.dev.has(s), `test speaker ${s} elsewhere`);
  for (const s of bySplit.dev) assert.ok(!bySplit.train.has(s), `dev speaker ${s} in training`);
  assert.equal(bySplit.test.size, SPEAKERS.test.length);
  const share = plans.filter((p) => p.split === 'test').length / plans.length;
  assert.ok(Math.abs(share - SPEAKERS.test.length / 60) < 0.03, `test share ${share}`);
  assert.ok(planUtterance(5, { seed: 3, minWords: 2, maxWords: 2 }).words.length === 2);
});

test("rendering trims the synthesiser's silence, sets the peak and adds noise at the planned SNR", () => {
  const rate = 16000;
  const speech = new Float32Array(8000);
  for (let i = 3000; i < 5000; i++) speech[i] = 0.2 * Math.sin(i / 5);
  const plan = { ...planUtterance(0, { seed: 1 }), peak: 0.5, snrDb: 20, leadSeconds: 0.05, tailSeconds: 0.05 };
  const out = renderUtterance(speech, rate, plan, 1);
  // 2000 samples of speech + 2 × 20 ms margins + 2 × 50 ms silences (± the trim threshold)
  assert.ok(Math.abs(out.length - (2000 + 640 + 1600)) <= 4, `length ${out.length}`);
  let noise = 0;
  for (let i = 0; i < 700; i++) noise += out[i]! ** 2;
  const speechRms = 0.5 / Math.SQRT2;
  const snr = 20 * Math.log10(speechRms / Math.sqrt(noise / 700));
  assert.ok(Math.abs(snr - 20) < 1, `SNR ${snr}`);
  assert.deepEqual(renderUtterance(speech, rate, plan, 1), out);
});

test('the shipped data/speech-mini: every manifest line checks out, and no test or dev speaker is in training', () => {
  const dir = fileURLToPath(new URL('../../data/speech-mini/', import.meta.url));
  const counts = Object.fromEntries(
    (['train', 'dev', 'test'] as const).map((s) => [s, readManifest(join(dir, `${s}.csv`), DEFAULT_ALPHABET).length]),
  );
  assert.deepEqual(counts, { train: 224, dev: 34, test: 42 });
  const rows = readFileSync(join(dir, 'utterances.csv'), 'utf8')
    .trim()
    .split('\n')
    .slice(1)
    .map((l) => l.split(','));
  assert.equal(rows.length, 300);
  const speakers = (split: string): Set<string> =>
    new Set(rows.filter((r) => r[1] === split).map((r) => r[2]!.split('+')[1] ?? ''));
  const train = speakers('train');
  for (const s of [...speakers('dev'), ...speakers('test')])
    assert.ok(!train.has(s), `speaker ${s} is also in training`);
  // the plan reproduces the shipped corpus's choices
  for (const r of rows.slice(0, 20)) {
    const p = planUtterance(Number(r[0]!.slice(5, 11)), { seed: 1, minWords: 1, maxWords: 2 });
    assert.deepEqual(
      [p.split, p.voice, String(p.rate), String(p.pitch), p.words.join(' ')],
      [r[1], r[2], r[3], r[4], r[8]],
    );
  }
});
