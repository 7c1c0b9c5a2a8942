/**
 * The dataset registry: generic IDX with the class count from its labels, Fashion-MNIST as before,
 * in-memory datasets, normalisation (computed, given) and what goes into checkpoints and fingerprints.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { encodeIdx } from '../../src/data/idx.ts';
import { loadDataset } from '../../src/data/registry.ts';
import { memoryDataset, removeMemoryDataset } from '../../src/data/memory.ts';
import { dataMetadata, readDataMetadata, DATA_METADATA_KEY } from '../../src/data/metadata.ts';
import { datasetFingerprint } from '../../src/data/fingerprint.ts';
import { parseConfig, toYamlForm } from '../../src/config/index.ts';
import { tmpDir, writeFakeRelease } from './helpers.ts';

const specOf = (data: Record<string, unknown>, input: number[] = [2, 2, 1]) =>
  parseConfig({ model: { input, layers: [{ flatten: {} }, { dense: { units: 3 } }] }, data }).data;

test('idx: any images + labels pair; a 3-class set gets 3 classes; MNIST-named defaults in data.dir; classNames', async () => {
  const dir = tmpDir();
  const images = Uint8Array.from({ length: 6 * 4 }, (_, i) => i * 10);
  writeFileSync(join(dir, 'imgs.idx'), encodeIdx([6, 2, 2], images));
  writeFileSync(join(dir, 'labs.idx'), encodeIdx([6], Uint8Array.from([0, 1, 2, 0, 1, 2])));
  const data = await loadDataset(specOf({ dataset: 'idx', dir, train: { images: 'imgs.idx', labels: 'labs.idx' } }), {
    inputShape: [2, 2, 1],
    seed: 1,
  });
  assert.equal(data.train.classes, 3);
  assert.deepEqual(data.train.sampleShape, [2, 2, 1]);
  assert.equal(data.train.images[5], Math.fround(50 / 255));
  assert.equal(data.test, undefined);
  // MNIST file names in data.dir (a 3-class release)
  writeFileSync(join(dir, 'train-images-idx3-ubyte'), encodeIdx([6, 2, 2], images));
  writeFileSync(join(dir, 'train-labels-idx1-ubyte'), encodeIdx([6], Uint8Array.from([0, 1, 2, 0, 1, 2])));
  writeFileSync(join(dir, 't10k-images-idx3-ubyte'), encodeIdx([1, 2, 2], images.subarray(0, 4)));
  writeFileSync(join(dir, 't10k-labels-idx1-ubyte'), encodeIdx([1], Uint8Array.from([1])));
  const release = await loadDataset(specOf({ dataset: 'idx', dir, classNames: ['a', 'b', 'c'] }), {
    inputShape: [2, 2, 1],
    seed: 1,
  });
  assert.equal(release.test!.count, 1);
  assert.deepEqual(release.train.classNames, ['a', 'b', 'c']);
  await assert.rejects(
    loadDataset(specOf({ dataset: 'idx', dir, classNames: ['a', 'b'] }), { inputShape: [2, 2, 1], seed: 1 }),
    /label 2 of sample 2 is outside 0\.\.1, the 2 classes of data\.classNames/,
  );
  await assert.rejects(
    loadDataset(specOf({ dataset: 'idx', dir: join(dir, 'none') }), { inputShape: [2, 2, 1], seed: 1 }),
    /data\.train: no IDX files given and .*train-images-idx3-ubyte\[\.gz\]/,
  );
});

test('fashion-mnist configs work unchanged (10 classes, named); a validation fraction is held out of training', async () => {
  const dir = tmpDir();
  writeFakeRelease(dir, { train: 20, test: 5 });
  const plain = parseConfig({
    model: { input: [28, 28, 1], layers: [{ flatten: {} }, { dense: { units: 10 } }] },
    data: { dir },
  });
  assert.deepEqual(plain.data, {
    dataset: 'fashion-mnist',
    dir,
    batchSize: 64,
    batchSizeScope: 'perDevice',
    shuffle: true,
  });
  const data = await loadDataset(plain.data, { inputShape: [28, 28, 1], seed: 1 });
  assert.equal(data.train.classes, 10);
  assert.equal(data.train.classNames![9], 'Ankle boot');
  assert.equal(data.validation, undefined);
  const held = await loadDataset({ ...plain.data, validation: 0.25 }, { inputShape: [28, 28, 1], seed: 1 });
  assert.equal(held.train.count, 15);
  assert.equal(held.validation!.count, 5);
  assert.equal(held.test!.count, 5);
  assert.match(held.source, /5 of its training samples held out for validation/);
});

test('memory datasets: typed arrays with a shape, or length + get(i); the task from y; unknown names are refused', async () => {
  const x = Float32Array.from({ length: 12 }, (_, i) => i);
  const name = memoryDataset({ x, shape: [6, 2], y: Int32Array.from([0, 1, 2, 0, 1, 2]) }, 'mem-a');
  const reg = memoryDataset({ length: 3, get: (i) => ({ x: [i, i + 1], y: [i * 0.5, 1] }) });
  assert.match(reg, /^memory-\d+$/);
  const ctx = { inputShape: [2], seed: 1 };
  const spec = (train: string, more = {}) =>
    parseConfig({
      model: { input: [2], layers: [{ dense: { units: 3 } }] },
      data: { dataset: 'memory', train, ...more },
    }).data;
  const a = await loadDataset(spec(name, { validation: 0.5 }), ctx);
  assert.equal(a.train.classes, 3);
  assert.equal(a.train.count + a.validation!.count, 6);
  x[0] = 99;
  assert.equal((await loadDataset(spec(name), ctx)).train.images[0], 0, 'the arrays were copied at registration');
  const r = await loadDataset(spec(reg), ctx);
  assert.equal(r.train.task, 'regression');
  assert.equal(r.train.targetSize, 2);
  assert.deepEqual(Array.from(r.train.targets!), [0, 1, 0.5, 1, 1, 1]);
  assert.throws(
    () => memoryDataset({ x, shape: [5, 2], y: new Int32Array(5) }),
    /x holds 12 values but shape \[5, 2\] needs 10/,
  );
  assert.throws(
    () => memoryDataset({ x, shape: [6, 2], y: Float32Array.from([0, 1, 2, 0, 1, 2.5]), task: 'classification' }),
    /y\[5\] = 2\.5 is not a class index/,
  );
  assert.ok(removeMemoryDataset(name));
  await assert.rejects(
    loadDataset(spec(name), ctx),
    /data\.train: no in-memory dataset named "mem-a" in this process .*register it with memoryDataset/,
  );
});

test('normalisation: computed per channel from the training split only, or given; recorded in the checkpoint metadata', async () => {
  // 4 samples of [1, 1, 2]: channel 0 = 0, 2, 4, 6 (mean 3, std √5); channel 1 constant 5 (std → 1)
  const x = Float32Array.from([0, 5, 2, 5, 4, 5, 6, 5]);
  const name = memoryDataset({ x, shape: [4, 1, 1, 2], y: Int32Array.from([0, 1, 0, 1]), classNames: ['no', 'yes'] });
  const test = memoryDataset({ x: Float32Array.from([3, 6]), shape: [1, 1, 1, 2], y: Int32Array.from([1]) });
  const spec = (normalize: unknown) =>
    parseConfig({
      model: { input: [1, 1, 2], layers: [{ flatten: {} }, { dense: { units: 2 } }] },
      data: { dataset: 'memory', train: name, test, normalize },
    }).data;
  const data = await loadDataset(spec('computed'), { inputShape: [1, 1, 2], seed: 1 });
  assert.deepEqual(data.preprocess!.normalization!.mean, [3, 5]);
  assert.ok(Math.abs(data.preprocess!.normalization!.std[0]! - Math.sqrt(5)) < 1e-9);
  assert.equal(data.preprocess!.normalization!.std[1], 1);
  assert.ok(Math.abs(data.train.images[0]! - -3 / Math.sqrt(5)) < 1e-6);
  assert.deepEqual(Array.from(data.test!.images), [0, 1], 'the test set normalised with the training statistics');
  const meta = readDataMetadata(dataMetadata(data))!;
  assert.deepEqual(meta, {
    task: 'classification',
    inputShape: [1, 1, 2],
    classNames: ['no', 'yes'],
    normalization: data.preprocess!.normalization,
  });
  assert.equal(typeof dataMetadata(data)[DATA_METADATA_KEY], 'string');
  const given = await loadDataset(spec({ mean: 1, std: [2, 4] }), { inputShape: [1, 1, 2], seed: 1 });
  assert.deepEqual(Array.from(given.test!.images), [1, 1.25]);
  await assert.rejects(
    loadDataset(spec({ mean: [1, 2, 3], std: 1 }), { inputShape: [1, 1, 2], seed: 1 }),
    /data\.normalize\.mean: 3 values, but the samples .* have 2 channels/,
  );
  assert.throws(
    () => spec({ mean: 0, std: 0 }),
    /data\.normalize: expected computed \(from the training split\) or \{ mean/,
  );
  // the normalised config writes back to YAML form and parses to itself
  const config = parseConfig({
    model: { input: [1, 1, 2], layers: [{ flatten: {} }, { dense: { units: 2 } }] },
    data: {
      dataset: 'memory',
      train: name,
      normalize: { mean: 1, std: [2, 4] },
      augment: { flip: true },
      validation: 0.25,
    },
  });
  assert.deepEqual(parseConfig(toYamlForm(config)), config);
});

test("fingerprints tell datasets apart by targets, class names and normalisation, and keep Fashion-MNIST's fields", () => {
  const base = {
    name: 'd',
    images: new Float32Array(4),
    labels: new Int32Array(2),
    count: 2,
    sampleShape: [2],
    classes: 2,
  };
  assert.deepEqual(Object.keys(datasetFingerprint(base)), ['samples', 'sample shape', 'classes', 'first samples']);
  const a = datasetFingerprint({
    ...base,
    task: 'regression',
    targets: Float32Array.from([1, 2]),
    targetSize: 1,
    classes: 0,
  });
  const b = datasetFingerprint({
    ...base,
    task: 'regression',
    targets: Float32Array.from([1, 3]),
    targetSize: 1,
    classes: 0,
  });
  assert.notEqual(a['first samples'], b['first samples']);
  assert.notEqual(
    datasetFingerprint({ ...base, classNames: ['x', 'y'] })['class names'],
    datasetFingerprint({ ...base, classNames: ['y', 'x'] })['class names'],
  );
  assert.ok(datasetFingerprint({ ...base, normalization: { mean: [0], std: [1] } }).normalization);
});
