/**
 * The validation split (seeded, deterministic, disjoint) and image augmentation (deterministic, and
 * the same for a sample whichever batch or device slice it is gathered in).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { splitValidation, validationIndices } from '../../src/data/split.ts';
import { Augmenter, drawTransform, transformSample } from '../../src/data/augment.ts';
import { Batcher } from '../../src/data/batcher.ts';
import { GlobalBatchSampler } from '../../src/data/sampler.ts';
import type { Dataset } from '../../src/data/dataset.ts';

test('validation indices: round(f·N) of them, disjoint from training, together every sample, a function of the seed', () => {
  const a = validationIndices(1000, 0.1, 7);
  assert.equal(a.validation.length, 100);
  assert.equal(a.train.length, 900);
  const all = new Set([...a.validation, ...a.train]);
  assert.equal(all.size, 1000, 'disjoint and complete');
  assert.deepEqual(validationIndices(1000, 0.1, 7), a, 'same seed, same split');
  assert.notDeepEqual(validationIndices(1000, 0.1, 8).validation, a.validation, 'another seed, another split');
  assert.ok(
    a.validation.every((v, i) => i === 0 || v > a.validation[i - 1]!),
    'file order kept',
  );
  assert.throws(() => validationIndices(5, 0.05, 1), /data\.validation: 0\.05 of 5 training samples is no sample/);
  assert.throws(() => validationIndices(2, 0.9, 1), /leaves none to train on/);
});

test('splitValidation copies the samples and labels of each part', () => {
  const ds: Dataset = {
    name: 'd',
    images: Float32Array.from({ length: 20 }, (_, i) => i),
    labels: Int32Array.from({ length: 10 }, (_, i) => i % 3),
    count: 10,
    sampleShape: [2],
    classes: 3,
    targets: Float32Array.from({ length: 10 }, (_, i) => i * 10),
    targetSize: 1,
  };
  const { train, validation } = splitValidation(ds, 0.3, 1);
  assert.equal(validation.count, 3);
  for (const part of [train, validation]) {
    for (let k = 0; k < part.count; k++) {
      const i = part.images[2 * k]! / 2;
      assert.equal(part.labels[k], i % 3);
      assert.equal(part.targets![k], i * 10);
    }
  }
});

test('transforms: flip mirrors, crop pads with zeros, shift fills with the edge', () => {
  // one 2×3 single-channel image: rows [1 2 3] [4 5 6]
  const img = () => Float32Array.from([1, 2, 3, 4, 5, 6]);
  const scratch = new Float32Array(6);
  const none = { flip: false, cropY: 0, cropX: 0, shiftY: 0, shiftX: 0 };
  const run = (t: typeof none) => {
    const a = img();
    transformSample(a, 0, [2, 3, 1], t, scratch);
    return Array.from(a);
  };
  assert.deepEqual(run({ ...none, flip: true }), [3, 2, 1, 6, 5, 4]);
  assert.deepEqual(run({ ...none, cropX: 1 }), [2, 3, 0, 5, 6, 0]);
  assert.deepEqual(run({ ...none, cropY: -1 }), [0, 0, 0, 1, 2, 3]);
  assert.deepEqual(run({ ...none, shiftX: 1 }), [2, 3, 3, 5, 6, 6]);
  assert.deepEqual(run({ ...none, shiftX: -2, shiftY: 1 }), [4, 4, 4, 4, 4, 4]);
});

test('augmentation is a function of (seed, epoch, sample): the same in any batch split, different across epochs', () => {
  const N = 24,
    shape = [4, 4, 2],
    size = 32;
  const ds: Dataset = {
    name: 'img',
    images: Float32Array.from({ length: N * size }, (_, i) => (i * 37) % 101),
    labels: new Int32Array(N),
    count: N,
    sampleShape: shape,
    classes: 1,
  };
  const spec = { flip: true, crop: 1, shift: 1 };
  // one device with the global batch of 8 vs 3 devices taking their slices of the same global batches
  const epochOf = (devices: number, epoch: number) => {
    const out = new Float32Array(N * size);
    for (let rank = 0; rank < devices; rank++) {
      const sampler = new GlobalBatchSampler({
        count: N,
        batchSize: 8,
        worldSize: devices,
        rank,
        seed: 5,
        shuffle: true,
        dropLast: false,
      });
      const batcher = new Batcher(ds, 0, new Augmenter(spec, shape, 5));
      for (const b of sampler.epoch(epoch)) {
        const { images } = batcher.gather(b.indices, epoch);
        for (const [k, i] of b.indices.entries()) out.set(images.subarray(k * size, (k + 1) * size), i * size);
      }
    }
    return out;
  };
  const one = epochOf(1, 0);
  assert.deepEqual(epochOf(3, 0), one, '3 devices augment every sample as 1 device does');
  assert.deepEqual(epochOf(1, 0), one, 'deterministic');
  assert.notDeepEqual(epochOf(1, 1), one, 'another epoch, other transforms');
  assert.notDeepEqual(one, ds.images, 'something was augmented');
  // the draws themselves: every kind of transform occurs, offsets within their ranges
  const draws = Array.from({ length: 200 }, (_, i) => drawTransform(spec, 5, 0, i));
  assert.ok(draws.some((t) => t.flip) && draws.some((t) => !t.flip));
  for (const key of ['cropX', 'cropY', 'shiftX', 'shiftY'] as const) {
    assert.deepEqual([...new Set(draws.map((t) => t[key]))].sort(), [-1, 0, 1], key);
  }
  assert.throws(
    () => new Augmenter(spec, [16], 1),
    /data\.augment: flip, crop and shift work on images \[H, W, C\], but the samples are 16/,
  );
  assert.throws(
    () => new Augmenter({ crop: 4 }, [4, 4, 1], 1),
    /data\.augment\.crop: 4 pixels is not less than the 4×4 images/,
  );
});
