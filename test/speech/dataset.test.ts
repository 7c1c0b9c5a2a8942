import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readdirSync, rmSync, statSync, utimesSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseAlphabet } from '../../src/speech/alphabet.ts';
import { FeatureExtractor } from '../../src/speech/features.ts';
import { resolveFeatureOptions } from '../../src/speech/featureOptions.ts';
import { normalizeUtterance } from '../../src/speech/normalize.ts';
import { gatherSpeechBatch } from '../../src/speech/speechBatch.ts';
import { loadSpeechData } from '../../src/speech/speechData.ts';
import {
  limitSpeechDataset,
  shareSpeechDataset,
  speechDatasetFingerprint,
  utterance,
} from '../../src/speech/speechDataset.ts';
import { readWav } from '../../src/speech/wav.ts';
import { csv, tmpDir, toneWav, writeTree } from './helpers.ts';

/** A dataset directory: 4 train, 2 dev, 2 test utterances, WAVs under wavs/. */
function makeSet(): string {
  const dir = tmpDir();
  writeTree(dir, {
    'wavs/a.wav': toneWav(0.3, 1),
    'wavs/b.wav': toneWav(0.45, 2),
    'wavs/c.wav': toneWav(0.25, 3),
    'wavs/d.wav': toneWav(0.6, 4),
    'wavs/e.wav': toneWav(0.35, 5),
    'wavs/f.wav': toneWav(0.4, 6),
    'train.csv': csv([
      ['wavs/a.wav', 'Three Seven'],
      ['wavs/b.wav', "don't stop"],
      ['wavs/c.wav', 'go'],
      ['wavs/d.wav', 'one two three'],
    ]),
    'dev.csv': csv([
      ['wavs/e.wav', 'yes'],
      ['wavs/a.wav', 'no'],
    ]),
    'test.csv': csv([
      ['wavs/f.wav', 'left'],
      ['wavs/c.wav', 'right'],
    ]),
  });
  return dir;
}

test("a speech directory loads: labels are alphabet index + 1, features are the extractor's, normalised per utterance", async () => {
  const dir = makeSet();
  try {
    const data = await loadSpeechData(dir, { cache: false, features: { context: 2 } });
    assert.equal(data.train.count, 4);
    assert.equal(data.validation?.count, 2);
    assert.equal(data.test.count, 2);
    // default alphabet: ' ' → 1, a → 2 … z → 27, ' → 28 (0 is the blank)
    const u0 = utterance(data.train, 0);
    assert.deepEqual(
      Array.from(u0.labels),
      [...'three seven'].map((c) => (c === ' ' ? 1 : c.charCodeAt(0) - 96 + 1)),
    );
    assert.equal(utterance(data.train, 1).labels[3], 28);
    assert.equal(u0.source, `${join(dir, 'train.csv')}:2 (wavs/a.wav)`);
    assert.equal(data.train.transcripts[0], 'Three Seven');
    // features: 0.30 s at 32 ms / 20 ms → 1 + ⌊(4800 − 512)/320⌋ = 14 frames of 26
    const options = resolveFeatureOptions();
    const raw = new FeatureExtractor(options).compute(readWav(join(dir, 'wavs/a.wav'), 16000).samples);
    normalizeUtterance(raw.data, raw.frames, raw.featureSize);
    assert.equal(u0.frames, 14);
    assert.deepEqual(u0.features, raw.data);
    // a batch: [N, T, 26·5] zero past each length, labels concatenated
    const batch = gatherSpeechBatch(data.train, [2, 0]);
    const T = batch.maxFrames;
    assert.equal(batch.inputSize, 130);
    assert.deepEqual(Array.from(batch.lengths), [data.train.frames[2], 14]);
    assert.equal(T, Math.max(data.train.frames[2]!, 14));
    assert.deepEqual(Array.from(batch.labelLengths), [2, 11]);
    assert.equal(batch.maxLabels, 11);
    assert.deepEqual(Array.from(batch.labels.subarray(0, 11)), [8, 16, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
    assert.deepEqual(batch.labels.subarray(11), u0.labels);
    const pastEnd = batch.inputs.subarray(batch.lengths[0]! * 130, T * 130);
    assert.ok(pastEnd.every((v) => v === 0));
    // frame 0 of sample 1, centre block = its own features; the two blocks before it are padding zeros
    assert.deepEqual(
      Array.from(batch.inputs.subarray(T * 130 + 52, T * 130 + 78)),
      Array.from(u0.features.subarray(0, 26)),
    );
    assert.ok(batch.inputs.subarray(T * 130, T * 130 + 52).every((v) => v === 0));
    assert.match(speechDatasetFingerprint(data.train)['first utterances']!, /^sha256:[0-9a-f]{12}$/);
    // limits are views; shared copies are equal and live in SharedArrayBuffers
    const two = limitSpeechDataset(data.train, 2);
    assert.equal(two.count, 2);
    assert.deepEqual(utterance(two, 1), utterance(data.train, 1));
    assert.equal(two.features.length, (data.train.frames[0]! + data.train.frames[1]!) * 26);
    const shared = shareSpeechDataset(data.train);
    assert.ok(shared.features.buffer instanceof SharedArrayBuffer);
    assert.deepEqual(speechDatasetFingerprint(shared), speechDatasetFingerprint(data.train));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('the feature cache reads back what computing gives; a changed option or file recomputes', async () => {
  const dir = makeSet();
  const cacheDir = join(dir, 'cache');
  try {
    const logs: string[] = [];
    const log = (m: string): void => {
      logs.push(m);
    };
    const fresh = await loadSpeechData(dir, { cache: false });
    const first = await loadSpeechData(dir, { cacheDir, log });
    assert.match(logs.pop()!, /computed 8 of 8 utterances, cached in/);
    assert.equal(readdirSync(cacheDir).length, 3);
    const second = await loadSpeechData(dir, { cacheDir, log });
    assert.equal(logs.length, 0, 'nothing computed from a warm cache');
    for (const ds of ['train', 'test'] as const) {
      assert.deepEqual(second[ds].features, fresh[ds].features);
      assert.deepEqual(first[ds].features, fresh[ds].features);
    }
    // another option set: another cache file, everything computed again
    await loadSpeechData(dir, { cacheDir, log, features: { stepMs: 10 } });
    assert.match(logs.pop()!, /computed 8 of 8/);
    assert.equal(readdirSync(cacheDir).length, 6);
    // normalize and context are applied after the cache: no recomputation
    await loadSpeechData(dir, { cacheDir, log, features: { normalize: 'none', context: 3 } });
    assert.equal(logs.length, 0);
    // a touched file is recomputed (twice: it is in train and dev)
    const t = statSync(join(dir, 'wavs/a.wav')).mtime;
    utimesSync(join(dir, 'wavs/a.wav'), t, new Date(t.getTime() + 5000));
    await loadSpeechData(dir, { cacheDir, log });
    assert.match(logs.pop()!, /computed 2 of 8/);
    // a damaged cache file is ignored and rewritten
    for (const f of readdirSync(cacheDir)) writeFileSync(join(cacheDir, f), 'PTFEAT1\n\u0004\u0000\u0000\u0000{}  ');
    const again = await loadSpeechData(dir, { cacheDir, log });
    assert.ok(logs.some((m) => /ignoring the damaged feature cache/.test(m)));
    assert.deepEqual(again.train.features, fresh.train.features);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('bad manifests: one line naming file:line, and no cache written', async () => {
  const cases: [string, Record<string, string | Uint8Array>, RegExp][] = [
    [
      'missing WAV',
      {
        'test.csv': csv([
          ['wavs/f.wav', 'left'],
          ['wavs/zz.wav', 'right'],
        ]),
      },
      /test\.csv:3: wavs\/zz\.wav: no such file \(looked for .*zz\.wav; a relative wav_filename is relative to the manifest's folder\)$/,
    ],
    [
      'non-WAV file',
      { 'wavs/f.wav': 'not audio at all' },
      /test\.csv:2: wavs\/f\.wav: not a readable WAV file \(Not a supported format\)/,
    ],
    [
      'empty transcript',
      {
        'dev.csv': csv([
          ['wavs/e.wav', 'yes'],
          ['wavs/a.wav', '  '],
        ]),
      },
      /dev\.csv:3: the transcript is empty/,
    ],
    [
      'unknown character',
      {
        'train.csv': csv([
          ['wavs/a.wav', 'three'],
          ['wavs/b.wav', 'seven!'],
        ]),
      },
      /train\.csv:3: the transcript "seven!" has '!' \(U\+0021\), which is not in the alphabet \(default \(space, a–z, apostrophe\)\)/,
    ],
    [
      'too short',
      { 'wavs/c.wav': toneWav(0.02, 3) },
      /train\.csv:4: wavs\/c\.wav: 0\.020 s of audio is shorter than one 32 ms analysis window/,
    ],
    [
      'wrong size',
      { 'test.csv': 'wav_filename,wav_filesize,transcript\nwavs/f.wav,12,left\n' },
      /test\.csv:2: wav_filesize is 12 but wavs\/f\.wav has \d+ bytes/,
    ],
    ['no header', { 'test.csv': 'wavs/f.wav,12,left\n' }, /test\.csv:1: the header has no wav_filename column/],
    [
      'field count',
      { 'test.csv': 'wav_filename,wav_filesize,transcript\nwavs/f.wav,left\n' },
      /test\.csv:2: 2 fields, the header has 3/,
    ],
  ];
  for (const [what, files, message] of cases) {
    const dir = makeSet();
    const cacheDir = join(dir, 'cache');
    try {
      writeTree(dir, files);
      await assert.rejects(
        () => loadSpeechData(dir, { cacheDir }),
        (e: Error) => {
          assert.match(e.message, message, what);
          assert.equal(e.message.split('\n').length, 1, `${what}: one line`);
          return true;
        },
      );
      assert.ok(!existsSync(cacheDir), `${what}: nothing written`);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }
  const dir = makeSet();
  try {
    rmSync(join(dir, 'test.csv'));
    await assert.rejects(
      () => loadSpeechData(dir),
      /no test\.csv; a speech dataset directory holds train\.csv and test\.csv/,
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("alphabet files: DeepSpeech's format, and quoted CSV fields", async () => {
  const a = parseAlphabet('# comment\n \na\nb\n\\#\n', 'alphabet.txt');
  assert.deepEqual(a.symbols, [' ', 'a', 'b', '#']);
  assert.throws(
    () => parseAlphabet('a\nab\n', 'alphabet.txt'),
    /alphabet\.txt:2: "ab" has 2 characters; each line holds one symbol/,
  );
  assert.throws(
    () => parseAlphabet('a\nb\na\n', 'alphabet.txt'),
    /alphabet\.txt:3: 'a' \(U\+0061\) is already the symbol of line 1/,
  );
  const dir = makeSet();
  try {
    writeTree(dir, {
      'alphabet.txt': '# digits, comma and space\n \n,\n1\n2\n',
      'train.csv': 'wav_filename,transcript\n"wavs/a.wav","1,2 1"\n',
      'test.csv': 'transcript,wav_filename\n21,wavs/f.wav\n',
      'dev.csv': 'wav_filename,wav_filesize,transcript\n',
    });
    await assert.rejects(
      () => loadSpeechData(dir, { cache: false, alphabet: join(dir, 'alphabet.txt') }),
      /dev\.csv: the manifest lists no utterances/,
    );
    rmSync(join(dir, 'dev.csv'));
    const data = await loadSpeechData(dir, { cache: false, alphabet: join(dir, 'alphabet.txt') });
    assert.deepEqual(Array.from(data.train.labels), [3, 2, 4, 1, 3]);
    assert.deepEqual(Array.from(data.test.labels), [4, 3]);
    assert.equal(data.validation, undefined);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
