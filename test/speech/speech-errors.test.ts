/**
 * Bad speech input through `train()`: each one clear line naming the manifest's file and line (or
 * the config field), found before the run directory or any feature cache is written.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { parseConfig } from '../../src/config/index.ts';
import { train } from '../../src/runtime/run/train.ts';
import { csv, tmpDir, toneWav, writeTree } from './helpers.ts';

/** A speech dataset directory: train.csv with `rows` (2 good ones first), a one-line test.csv. */
function dataset(rows: [string, string][] = [], files: Record<string, string | Uint8Array> = {}): string {
  const dir = tmpDir();
  writeTree(dir, {
    'wavs/a.wav': toneWav(0.5, 1),
    'wavs/b.wav': toneWav(0.6, 2),
    'wavs/short.wav': toneWav(0.1, 3),
    ...files,
    'train.csv': csv([['wavs/a.wav', 'one'], ['wavs/b.wav', 'two'], ...rows]),
    'test.csv': csv([['wavs/a.wav', 'one']]),
  });
  return dir;
}

function config(dir: string, o: { units?: number; loss?: unknown } = {}) {
  return parseConfig(
    {
      model: { input: [null, 26], layers: [{ lstm: { units: 4 } }, { dense: { units: o.units ?? 29 } }] },
      loss: o.loss ?? 'ctc',
      data: { dataset: 'speech', dir, batchSize: 2, cacheDir: join(dir, 'cache') },
      train: { epochs: 1, backend: 'js' },
    },
    'test config',
  );
}

/** train() rejects with `message`, leaving no run directory and no feature cache. */
async function refuses(
  dir: string,
  message: RegExp,
  o: { units?: number; loss?: unknown; cacheWritten?: boolean } = {},
): Promise<void> {
  const out = join(dir, 'run');
  await assert.rejects(train(config(dir, o), { out }), (e: Error) => {
    assert.match(e.message, message);
    assert.ok(!e.message.includes('\n'), `one line: ${e.message}`);
    return true;
  });
  assert.ok(!existsSync(out), 'no run directory');
  if (!o.cacheWritten)
    assert.ok(!existsSync(join(dir, 'cache')) || readdirSync(join(dir, 'cache')).length === 0, 'no feature cache');
}

test('a missing WAV, a file that is not WAV, an empty transcript, an unknown character: the manifest line, nothing written', async () => {
  await refuses(dataset([['wavs/zz.wav', 'three']]), /train\.csv:4: wavs\/zz\.wav: no such file/);
  await refuses(
    dataset([['wavs/f.wav', 'four']], { 'wavs/f.wav': 'this is text, not RIFF audio\n'.repeat(4) }),
    /train\.csv:4: wavs\/f\.wav: not a readable WAV file/,
  );
  await refuses(dataset([['wavs/b.wav', '']]), /train\.csv:4: the transcript is empty/);
  await refuses(
    dataset([['wavs/b.wav', 'seven!']]),
    /train\.csv:4: the transcript "seven!" has '!' \(U\+0021\), which is not in the alphabet/,
  );
});

test('an utterance too short for its transcript after the model (a strided conv1d) names its line before the run', async () => {
  // 0.1 s: 4 frames of features, fewer than the 11 characters of its transcript
  await refuses(
    dataset([['wavs/short.wav', 'seven seven']]),
    /train\.csv:4 \(wavs\/short\.wav\): the utterance is too short for its transcript "seven seven": 4 output frames \(4 frames\), but its 11 characters need at least 11/,
    { cacheWritten: true },
  );
  // 0.5 s (24 frames) halved by a stride-2 conv1d, then "three three" (11 labels, 2 repeated "ee"s) needs 13 of its 12
  const dir = dataset([['wavs/a.wav', 'three three']]);
  const strided = parseConfig({
    model: {
      input: [null, 26],
      layers: [{ conv1d: { filters: 4, kernelSize: 3, strides: 2, padding: 'same' } }, { dense: { units: 29 } }],
    },
    loss: 'ctc',
    data: { dataset: 'speech', dir, batchSize: 2, cache: false },
    train: { epochs: 1, backend: 'js' },
  });
  await assert.rejects(
    train(strided, { out: join(dir, 'run') }),
    /train\.csv:4 \(wavs\/a\.wav\): the utterance is too short for its transcript "three three": 12 output frames \(24 frames of features, 12 after the model's strides\), but its 11 characters with 2 repeated adjacent letters \(CTC needs a blank between them\) need at least 13/,
  );
  assert.ok(!existsSync(join(dir, 'run')));
});

test('the model against the alphabet, the loss against the data: one line with the fix', async () => {
  const dir = dataset();
  await refuses(
    dir,
    /model\.layers\[1\]: the model gives 30 outputs per frame but the alphabet \(default \(space, a–z, apostrophe\)\) has 28 symbols: a CTC model needs 29, one per symbol plus the blank; end with dense: \{ units: 29 \}/,
    { units: 30, cacheWritten: true },
  );
  await refuses(dir, /loss: softmaxCrossEntropy does not train on .*train\.csv, a speech dataset .*; use loss: ctc/, {
    loss: 'softmaxCrossEntropy',
    cacheWritten: true,
  });
  await assert.rejects(
    train(
      parseConfig({
        model: { input: [null, 26], layers: [{ dense: { units: 29 } }] },
        loss: 'ctc',
        data: { dataset: 'speech', dir, cacheDir: join(dir, 'cache'), features: { context: 2 } },
      }),
    ),
    /model\.input: the model takes \[null, 26\] per sample but .*train\.csv gives utterances of any number of frames of 130 values \(26 features × 5 frames of context \(data\.features\.context 2\)\); set model\.input: \[null, 130\]/,
  );
});
