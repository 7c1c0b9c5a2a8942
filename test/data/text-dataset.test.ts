/**
 * `dataset: text`: the split at the text's end, the training split's vocabulary, sequential and
 * random windows with their next-token labels, batches of T labels per sample, a folder of .txt
 * files, the checkpoint's record of the vocabulary, and the errors that name a file, line and
 * character.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseConfig } from '../../src/config/index.ts';
import { loadDataset } from '../../src/data/registry.ts';
import { trainingBatches } from '../../src/data/batches.ts';
import { Batcher } from '../../src/data/batcher.ts';
import { limitDataset, shareDataset, subsetDataset, type Dataset } from '../../src/data/dataset.ts';
import { checkResumedText, dataMetadata, readDataMetadata } from '../../src/data/metadata.ts';
import { datasetFingerprint } from '../../src/data/fingerprint.ts';
import { Vocabulary } from '../../src/data/vocabulary.ts';
import { writeCheckpoint } from '../../src/runtime/checkpoint/checkpoint.ts';
import { checkResumeText } from '../../src/runtime/run/resumeText.ts';
import { tmpDir } from './helpers.ts';

const specOf = (data: Record<string, unknown>, t: number) =>
  parseConfig({ model: { input: [t], layers: [{ dense: { units: 4 } }] }, data }).data;

/** Loads `text` (written to a file) as a text dataset of windows of `t`. */
async function load(text: string | Uint8Array, t: number, more: Record<string, unknown> = {}, seed = 1) {
  const dir = tmpDir();
  writeFileSync(join(dir, 'corpus.txt'), text);
  const { validation = 0, ...options } = more;
  const spec = specOf({ dataset: 'text', dir, validation, file: 'corpus.txt', ...options }, t);
  return { dir, data: await loadDataset(spec, { inputShape: [t], seed }) };
}

/** The characters of a window's ids. */
const chars = (ds: Dataset, ids: ArrayLike<number>) => Array.from(ids, (i) => ds.text!.vocabulary[i]).join('');
const windowText = (ds: Dataset, k: number, t: number) => chars(ds, ds.images.subarray(k * t, (k + 1) * t));
const labelText = (ds: Dataset, k: number, t: number) => chars(ds, ds.labels.subarray(k * t, (k + 1) * t));

test('sequential windows of T characters every stride (default T), labelled with the next character at each position', async () => {
  const { data } = await load('hgfedcbaji', 3);
  const ds = data.train;
  // the vocabulary: the characters sorted by code point
  assert.deepEqual(ds.text!.vocabulary, [...'abcdefghij']);
  assert.equal(ds.classes, 10);
  assert.equal(ds.task, 'language');
  assert.deepEqual(ds.sampleShape, [3]);
  assert.equal(ds.labelsPerSample, 3);
  // windows start at 0, 3, 6: the last needs characters 6..9 (its labels end at 9)
  assert.equal(ds.count, 3);
  assert.deepEqual(
    [0, 1, 2].map((k) => windowText(ds, k, 3)),
    ['hgf', 'edc', 'baj'],
  );
  assert.deepEqual(
    [0, 1, 2].map((k) => labelText(ds, k, 3)),
    ['gfe', 'dcb', 'aji'],
  );
  assert.equal(ds.images[0], 7); // 'h' is id 7
  assert.equal(data.validation, undefined);

  const strided = (await load('hgfedcbaji', 4, { stride: 2 })).data.train;
  // starts 0, 2, 4 (4 + 4 + 1 ≤ 10); 6 would need an 11th character
  assert.equal(strided.count, 3);
  assert.deepEqual(
    [0, 1, 2].map((k) => windowText(strided, k, 4)),
    ['hgfe', 'fedc', 'dcba'],
  );
  assert.deepEqual(
    [0, 1, 2].map((k) => labelText(strided, k, 4)),
    ['gfed', 'edcb', 'cbaj'],
  );
});

test('the validation split is the end of the text (nanoGPT: the first 90% trains); the vocabulary is the training split’s', async () => {
  // 20 characters, validation 0.2: characters 0..15 train, 16..19 validate
  const text = 'abababababababab' + 'baab';
  const { data } = await load(text, 3, { validation: 0.2 });
  assert.deepEqual(data.train.text!.vocabulary, ['a', 'b']);
  assert.equal(data.train.count, 5); // starts 0, 3, 6, 9, 12 within 16 characters
  const val = data.validation!;
  assert.equal(val.count, 1);
  assert.equal(windowText(val, 0, 3), 'baa');
  assert.equal(labelText(val, 0, 3), 'aab');
  assert.deepEqual(val.text!.vocabulary, ['a', 'b']);
  assert.match(data.source, /20 characters, 2 distinct; sequential windows of 3/);

  // the default fraction is 0.1
  const spec = specOf({ dataset: 'text', file: 'x.txt' }, 3);
  assert.equal(spec.dataset === 'text' && spec.validation, 0.1);
  assert.equal(spec.dataset === 'text' && spec.windows, 'sequential');
});

test('a validation character the training split lacks is an error naming the file, line, column and character', async () => {
  const text = 'ab\nab\nab\nab\nab\nab\naz\n';
  await assert.rejects(load(text, 2, { validation: 0.2 }), (e: Error) => {
    assert.match(e.message, /corpus\.txt:7:2: character 'z' \(U\+007A\) is not in the vocabulary of 3 characters/);
    assert.match(e.message, /use a smaller data\.validation/);
    return true;
  });
});

test('random windows: as many as sequential ones, at offsets drawn per (seed, epoch, sample) — a seed repeats them, a new epoch moves them', async () => {
  const text = 'the quick brown fox jumps over the lazy dog, then naps in the sun.\n'.repeat(3);
  const t = 8;
  const { data } = await load(text, t, { windows: 'random' }, 7);
  const ds = data.train;
  const sequential = (await load(text, t)).data.train;
  assert.equal(ds.count, sequential.count);
  const batches = (seed: number, worldSize = 1, rank = 0) =>
    trainingBatches(ds, { batchSize: 6, worldSize, rank, seed, shuffle: false });
  const epochWindows = (seed: number, epoch: number) => {
    const b = batches(seed);
    const out: string[] = [];
    for (const rb of b.epoch(epoch)) {
      const batch = b.gather(rb, epoch);
      assert.equal(batch.labels.length, batch.count * t);
      for (let k = 0; k < batch.count; k++) {
        const x = chars(ds, batch.images.subarray(k * t, (k + 1) * t));
        const y = chars(ds, batch.labels.subarray(k * t, (k + 1) * t));
        // a window of the text, and its labels the same window one character on
        const at = text.indexOf(x + y[t - 1]);
        assert.ok(at >= 0, `window ${JSON.stringify(x)} + ${JSON.stringify(y)} is not in the text`);
        assert.equal(y, text.slice(at + 1, at + 1 + t));
        out.push(x);
      }
    }
    return out;
  };
  const first = epochWindows(7, 0);
  assert.equal(first.length, ds.count);
  assert.deepEqual(epochWindows(7, 0), first, 'the same seed and epoch give the same windows');
  assert.notDeepEqual(epochWindows(7, 1), first, 'the next epoch draws other windows');
  assert.notDeepEqual(epochWindows(8, 0), first, 'another seed draws other windows');
  assert.notDeepEqual(
    first.slice(0, 5),
    [0, 1, 2, 3, 4].map((k) => windowText(sequential, k, t)),
  );
  // two devices' slices of a global batch are one device's batch, cut in two
  const one = batches(7).gather([...batches(7).epoch(2)][0]!, 2);
  const whole = { images: [...one.images], labels: [...one.labels] };
  const halves = [0, 1].map((rank) => {
    const b = batches(7, 2, rank);
    const g = b.gather([...b.epoch(2)][0]!, 2);
    return { images: [...g.images], labels: [...g.labels] };
  });
  assert.deepEqual([...halves[0]!.images, ...halves[1]!.images], whole.images);
  assert.deepEqual([...halves[0]!.labels, ...halves[1]!.labels], whole.labels);
});

test('batches, subsets, limits and shared copies carry T labels per sample', async () => {
  const { data } = await load('abcdefghijklmnopqrstuvwxyz', 4);
  const ds = data.train;
  assert.equal(ds.count, 6);
  const batch = new Batcher(ds).gather([2, 0]);
  assert.equal(batch.count, 2);
  assert.equal(chars(ds, batch.images), 'ijklabcd');
  assert.equal(chars(ds, batch.labels), 'jklmbcde');
  const sub = subsetDataset(ds, [5, 1], 'sub');
  assert.equal(chars(ds, sub.labels), 'vwxyfghi');
  const limited = limitDataset(ds, 2);
  assert.equal(limited.labels.length, 8);
  const shared = shareDataset(ds);
  assert.ok(shared.labels.buffer instanceof SharedArrayBuffer);
  assert.ok(shared.text!.tokens.buffer instanceof SharedArrayBuffer);
  assert.deepEqual([...shared.text!.tokens], [...ds.text!.tokens]);
  // shuffled training batches keep each window with its labels
  const b = trainingBatches(ds, { batchSize: 4, worldSize: 1, rank: 0, seed: 3, shuffle: true });
  for (const rb of b.epoch(0)) {
    const g = b.gather(rb, 0);
    for (let k = 0; k < g.count; k++) {
      const i = rb.indices[k]!;
      assert.equal(chars(ds, g.labels.subarray(k * 4, k * 4 + 4)), labelText(ds, i, 4));
    }
  }
});

test('a folder: every .txt file in name order, concatenated; errors name the file the character is in', async () => {
  const dir = tmpDir();
  const folder = join(dir, 'texts');
  mkdirSync(folder);
  writeFileSync(join(folder, 'b.txt'), 'cdcdcd\n');
  writeFileSync(join(folder, 'a.txt'), 'abab\n');
  writeFileSync(join(folder, 'notes.md'), 'zzzz');
  const spec = specOf({ dataset: 'text', dir, validation: 0, folder: 'texts' }, 3);
  const data = await loadDataset(spec, { inputShape: [3], seed: 1 });
  assert.equal(windowText(data.train, 0, 3), 'aba');
  assert.equal(windowText(data.train, 1, 3), 'b\nc');
  const both = createHash('sha256').update('abab\n').update('cdcdcd\n').digest('hex');
  assert.equal(data.train.text!.fingerprint, `sha256:${both}`);

  writeFileSync(join(folder, 'c.txt'), 'ab\nxy');
  const held = specOf({ dataset: 'text', dir, validation: 0.2, folder: 'texts' }, 3);
  await assert.rejects(loadDataset(held, { inputShape: [3], seed: 1 }), /texts\/c\.txt:2:1: character 'x'/);

  const empty = join(dir, 'empty');
  mkdirSync(empty);
  await assert.rejects(
    loadDataset(specOf({ dataset: 'text', dir, folder: 'empty' }, 3), { inputShape: [3], seed: 1 }),
    /data\.folder: .*empty holds no \.txt files/,
  );
});

test('bad input: file and folder, no text, a context the text is too short for, model.input, bytes that are not UTF-8', async () => {
  assert.throws(
    () => specOf({ dataset: 'text', file: 'a.txt', folder: 'b' }, 3),
    /data: name the text: either file .* or folder/,
  );
  assert.throws(() => specOf({ dataset: 'text' }, 3), /data: name the text/);
  assert.throws(() => specOf({ dataset: 'text', file: 'a.txt', normalize: 'computed' }, 3), /normalize/);
  assert.throws(() => specOf({ dataset: 'text', file: 'a.txt', testLimit: 3 }, 3), /testLimit/);
  assert.throws(() => specOf({ dataset: 'text', file: 'a.txt', windows: 'shuffled' }, 3), /windows/);
  await assert.rejects(
    load('abc', 3),
    /training split of .*corpus\.txt is 3 characters, too short for one window of 3/,
  );
  await assert.rejects(
    load('abcabcabcabcabcabcab', 3, { validation: 0.1 }),
    /data\.validation: the last 0\.1 of .* is 2 characters, too short for one window of 3/,
  );
  await assert.rejects(load(Uint8Array.of(0x61, 0xff, 0x62), 1), /corpus\.txt: not valid UTF-8 text/);
  const dir = tmpDir();
  writeFileSync(join(dir, 'c.txt'), 'abcabc');
  const spec = specOf({ dataset: 'text', dir, file: 'c.txt' }, 3);
  await assert.rejects(
    loadDataset(spec, { inputShape: [3, 2], seed: 1 }),
    /model\.input: a text dataset's samples are windows of T characters, model\.input \[T\]/,
  );
  await assert.rejects(
    loadDataset(specOf({ dataset: 'text', dir, file: 'none.txt' }, 3), { inputShape: [3], seed: 1 }),
    /data\.file: file .*none\.txt not found/,
  );
});

test('characters beyond the Basic Multilingual Plane are one token each; a byte-order mark is not text', async () => {
  const { data } = await load('\uFEFF🙂a🙂b🙂a🙂b', 2);
  assert.deepEqual(data.train.text!.vocabulary, ['a', 'b', '🙂']);
  assert.equal(windowText(data.train, 0, 2), '🙂a');
  assert.equal(labelText(data.train, 0, 2), 'a🙂');
});

test('the checkpoint records the vocabulary and the text’s fingerprint; a resume on another vocabulary is refused', async () => {
  const text = 'to be or not to be\n';
  const { data } = await load(text, 4);
  const meta = readDataMetadata(dataMetadata(data))!;
  assert.equal(meta.task, 'language');
  assert.deepEqual(meta.inputShape, [4]);
  assert.deepEqual(meta.text!.vocabulary, [...new Vocabulary([...'\n benort']).symbols]);
  assert.equal(meta.text!.fingerprint, `sha256:${createHash('sha256').update(text).digest('hex')}`);
  const fp = datasetFingerprint(data.train);
  assert.equal(fp.text, meta.text!.fingerprint);
  assert.match(fp.vocabulary!, /^sha256:/);

  const saved = dataMetadata(data);
  checkResumedText(saved, data.train, 'set/model.safetensors');
  const lines: string[] = [];
  const sameChars = (await load('be or not to be to\n', 4)).data.train;
  checkResumedText(saved, sameChars, 'set/model.safetensors', (m) => lines.push(m));
  assert.match(lines[0]!, /the training text differs from the run's .*its vocabulary is the same/);
  const other = (await load('to be, or not to be\n', 4)).data.train;
  assert.throws(
    () => checkResumedText(saved, other, 'set/model.safetensors'),
    /--resume: the training text's vocabulary \(9 characters\) differs from the run's \(8, recorded in set\/model\.safetensors\): 1 new \(',' \(U\+002C\)\)/,
  );
  // a resume reads the set's model file
  const set = tmpDir();
  writeCheckpoint(join(set, 'model.safetensors'), [], saved);
  checkResumeText(set, data.train);
  assert.throws(
    () => checkResumeText(set, other),
    /vocabulary \(9 characters\) differs from the run's \(8, recorded in .*model\.safetensors\)/,
  );
});
