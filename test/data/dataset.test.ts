import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Batcher, gather } from '../../src/data/batcher.ts';
import { limitDataset, type Dataset } from '../../src/data/dataset.ts';

function toy(count: number): Dataset {
  const images = new Float32Array(count * 4);
  for (let i = 0; i < images.length; i++) images[i] = i;
  const labels = Int32Array.from({ length: count }, (_, i) => i % 3);
  return { name: 'toy', images, labels, count, sampleShape: [2, 2, 1], classes: 3 };
}

test('limitDataset takes the first n samples without copying', () => {
  const ds = toy(10);
  const small = limitDataset(ds, 4);
  assert.equal(small.count, 4);
  assert.equal(small.images.length, 16);
  assert.equal(small.labels.length, 4);
  assert.equal(small.images.buffer, ds.images.buffer);
  assert.equal(small.labels.buffer, ds.labels.buffer);
  assert.equal(limitDataset(ds, 100).count, 10);
  assert.throws(() => limitDataset(ds, -1), /limitDataset\(toy\): the limit must be a whole number ≥ 0, got -1/);
});

test('gather copies the samples of an index list', () => {
  const ds = toy(6);
  const b = gather(ds, [5, 0, 2]);
  assert.equal(b.count, 3);
  assert.deepEqual([...b.images], [20, 21, 22, 23, 0, 1, 2, 3, 8, 9, 10, 11]);
  assert.deepEqual([...b.labels], [2, 0, 2]);
  assert.throws(() => gather(ds, [6]), /gather\(toy\): sample index 6 is outside 0\.\.5/);
});

test('gather writes into given buffers and checks their size', () => {
  const ds = toy(6);
  const img = new Float32Array(12),
    lab = new Int32Array(3);
  const b = gather(ds, [1, 2], img, lab);
  assert.equal(b.images.buffer, img.buffer);
  assert.equal(b.images.length, 8);
  assert.deepEqual([...b.labels], [1, 2]);
  assert.throws(() => gather(ds, [1, 2, 3, 4], img, lab), /the image buffer holds 12 values, the batch of 4 needs 16/);
});

test('Batcher reuses its buffers once sized', () => {
  const ds = toy(20);
  const batcher = new Batcher(ds, 4);
  const first = batcher.gather(new Int32Array([0, 1, 2, 3]));
  const second = batcher.gather(new Int32Array([4, 5]));
  assert.equal(first.images.buffer, second.images.buffer);
  assert.deepEqual([...second.labels], [1, 2]);
  const grown = batcher.gather(new Int32Array([0, 1, 2, 3, 4, 5]));
  assert.equal(grown.count, 6);
  const again = batcher.gather(new Int32Array([7]));
  assert.equal(again.images.buffer, grown.images.buffer);
});
