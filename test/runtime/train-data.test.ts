/**
 * Datasets through train(): a 3-class CSV trains a 3-unit model (the class count comes from the
 * data) and its checkpoint carries the class names; a wrong last layer is refused before any work;
 * augmented image batches on 2 hybrid devices train what 1 device trains.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { train, parseConfig, readCheckpoint, memoryDataset } from '../../src/index.ts';
import { readDataMetadata } from '../../src/data/metadata.ts';
import { assertClose } from '../util/close.ts';

/** 3 blobs in the plane, 20 rows each, labels as words; a deterministic pseudo-random spread. */
function blobsCsv(): string {
  const centres: [string, number, number][] = [
    ['circle', 0, 0],
    ['square', 3, 0],
    ['triangle', 0, 3],
  ];
  const rows = ['x,y,shape'];
  for (let i = 0; i < 60; i++) {
    const [name, cx, cy] = centres[i % 3]!;
    rows.push(
      `${(cx + Math.sin(i * 12.9898) * 0.6).toFixed(4)},${(cy + Math.cos(i * 78.233) * 0.6).toFixed(4)},${name}`,
    );
  }
  return `${rows.join('\n')}\n`;
}

const base = (dir: string, units: number) => ({
  model: { input: [2], layers: [{ dense: { units: 8, activation: 'relu' } }, { dense: { units } }] },
  optimizer: { adam: { lr: 0.05 } },
  data: { dataset: 'csv', dir, train: 'blobs.csv', validation: 0.2, batchSize: 16, normalize: 'computed' },
  train: { epochs: 1, backend: 'js', seed: 2 },
});

test('a 3-class CSV trains through train(): 3 classes from the data, named in the checkpoint; a 10-unit model is refused', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'paratrain-csv-'));
  writeFileSync(join(dir, 'blobs.csv'), blobsCsv());
  const result = await train(parseConfig(base(dir, 3)), { out: join(dir, 'run') });
  // no test file: the validation split is evaluated after epochs, and there is no test figure
  assert.ok(result.valAccuracy! >= 0 && result.valAccuracy! <= 1, `validation accuracy ${result.valAccuracy}`);
  assert.ok(Number.isNaN(result.testAccuracy), 'no test set, no test accuracy');
  const meta = readDataMetadata(readCheckpoint(result.checkpoint).metadata)!;
  assert.deepEqual(meta.classNames, ['circle', 'square', 'triangle']);
  assert.deepEqual(meta.inputShape, [2]);
  assert.equal(meta.normalization!.mean.length, 2);
  await assert.rejects(
    train(parseConfig(base(dir, 10)), { out: join(dir, 'run10') }),
    /model\.layers\[1\]: the model produces 10 scores per sample but .*blobs\.csv \(training part\) has 3 classes; end with a dense layer of 3 units/,
  );
  assert.ok(!existsSync(join(dir, 'run10')), 'refused before the run directory is made');
});

test('augmented image batches: hybrid on 2 devices equals 1 device with the global batch', {
  timeout: 120_000,
}, async () => {
  const N = 32,
    size = 4 * 4 * 1;
  const name = memoryDataset({
    x: Float32Array.from({ length: N * size }, (_, i) => ((i * 29) % 17) / 17),
    shape: [N, 4, 4, 1],
    y: Int32Array.from({ length: N }, (_, i) => i % 3),
  });
  const dir = mkdtempSync(join(tmpdir(), 'paratrain-aug-'));
  const config = (devices: number, augment: unknown = { flip: true, crop: 1, shift: 1 }) =>
    parseConfig({
      model: { input: [4, 4, 1], layers: [{ flatten: {} }, { dense: { units: 3 } }] },
      optimizer: { sgd: { lr: 0.1 } },
      data: {
        dataset: 'memory',
        train: name,
        validation: 0.25,
        batchSize: 8,
        batchSizeScope: 'global',
        augment,
      } as Record<string, unknown>,
      train: { epochs: 2, devices, backend: 'js', seed: 4, strategy: 'hybrid' },
    });
  const one = await train(config(1), { out: join(dir, 'one') });
  const two = await train(config(2), { out: join(dir, 'two') });
  const weights = (path: string) => Array.from(readCheckpoint(path).tensors.get('layers.1.kernel')!.data);
  assertClose(weights(two.checkpoint), weights(one.checkpoint), {
    rtol: 1e-5,
    atol: 1e-6,
    what: 'dense kernel, 2 devices vs 1',
  });
  const plain = await train(config(1, {}), { out: join(dir, 'plain') });
  assert.notDeepEqual(weights(plain.checkpoint), weights(one.checkpoint), 'augmentation changed what was trained');
});
