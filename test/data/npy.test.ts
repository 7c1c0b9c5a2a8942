/**
 * The .npy/.npz reader against NumPy's own writer (fixtures made by fixtures/numpy/make_fixtures.py
 * with /usr/bin/python3), against bytes written here, and on bad files; `dataset: npy` end to end.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { zipSync } from 'fflate';
import { encodeNpy, parseNpy, parseNpz } from '../../src/data/npy.ts';
import { loadDataset } from '../../src/data/registry.ts';
import { parseConfig } from '../../src/config/index.ts';
import { tmpDir } from './helpers.ts';

const fixtures = fileURLToPath(new URL('./fixtures/numpy/', import.meta.url));
const fixture = (name: string) => join(fixtures, name);
const expected = JSON.parse(readFileSync(fixture('expected.json'), 'utf8')) as {
  x: number[];
  xShape: number[];
  y: number[];
  u1: number[];
  targets: number[];
};
const read = (name: string) => parseNpy(readFileSync(fixture(name)), name);
const close = (a: ArrayLike<number>, b: readonly number[]) => {
  assert.equal(a.length, b.length);
  for (let i = 0; i < b.length; i++)
    assert.ok(Math.abs(a[i]! - b[i]!) <= 1e-6 * Math.max(1, Math.abs(b[i]!)), `index ${i}: ${a[i]} vs ${b[i]}`);
};

test('numpy-written .npy files read back as numpy wrote them: f4, f8, big-endian, format 2.0, u1, i4, i8', () => {
  for (const name of ['x_f4.npy', 'x_f8.npy', 'x_f4_big_endian.npy', 'x_f4_v2.npy']) {
    const a = read(name);
    assert.deepEqual(a.shape, expected.xShape, name);
    close(a.data, expected.x);
  }
  assert.equal(read('x_f8.npy').data instanceof Float64Array, true);
  assert.deepEqual(Array.from(read('x_u1.npy').data), expected.u1);
  for (const name of ['y_i8.npy', 'y_i4.npy', 'y_u1.npy'])
    assert.deepEqual(Array.from(read(name).data), expected.y, name);
  close(read('targets_f4.npy').data, expected.targets);
});

test('numpy-written .npz archives (savez and savez_compressed, zip64 headers) give their named arrays', () => {
  const plain = parseNpz(readFileSync(fixture('xy.npz')), 'xy.npz', ['x', 'y']);
  close(plain.get('x')!.data, expected.x);
  assert.deepEqual(Array.from(plain.get('y')!.data), expected.y);
  const packed = parseNpz(readFileSync(fixture('xy_compressed.npz')), 'xy_compressed.npz', ['features', 'labels']);
  close(packed.get('features')!.data, expected.x);
  assert.deepEqual(packed.get('features')!.shape, expected.xShape);
});

test('bytes written here parse back; bad files name the file and the fix', () => {
  const bytes = encodeNpy('f4', [2, 3], [1, 2, 3, 4, 5, 6]);
  assert.deepEqual(Array.from(parseNpy(bytes, 'a.npy').data), [1, 2, 3, 4, 5, 6]);
  assert.equal((10 + new DataView(bytes.buffer).getUint16(8, true)) % 64, 0, 'data aligned to 64 bytes as numpy does');
  assert.deepEqual(Array.from(parseNpy(encodeNpy('i8', [3], [7, 0, 2]), 'y.npy').data), [7, 0, 2]);
  assert.throws(
    () => parseNpy(bytes.subarray(0, bytes.length - 5), 'cut.npy'),
    /cut\.npy: truncated \.npy file: shape \(2, 3\) of <f4 needs 24 bytes of data, found 19/,
  );
  assert.throws(() => parseNpy(bytes.subarray(0, 40), 'cut.npy'), /cut\.npy: truncated \.npy file: the header needs/);
  assert.throws(() => parseNpy(new Uint8Array([1, 2, 3]), 'junk.npy'), /junk\.npy: not a \.npy file/);
  assert.throws(() => read('complex.npy'), /complex\.npy: dtype "<c8" is not supported \(float32, float64/);
  const fortran = Buffer.from(bytes).toString('latin1').replace("'fortran_order': False", "'fortran_order': True ");
  assert.throws(() => parseNpy(Buffer.from(fortran, 'latin1'), 'f.npy'), /f\.npy: .*Fortran order; save it in C order/);
});

function npyConfig(data: Record<string, unknown>) {
  return parseConfig({
    model: { input: [2, 2, 2], layers: [{ flatten: {} }, { dense: { units: 3 } }] },
    data: { dataset: 'npy', ...data },
  });
}
const ctx = { inputShape: [2, 2, 2], seed: 1 };

test('dataset npy: an .npz with named arrays, or x and y files; classes from the labels; bad labels name the record', async () => {
  const fromNpz = await loadDataset(
    npyConfig({ train: fixture('xy_compressed.npz'), arrays: { x: 'features', y: 'labels' } }).data,
    ctx,
  );
  assert.deepEqual(fromNpz.train.sampleShape, [2, 2, 2]);
  assert.equal(fromNpz.train.classes, 3);
  assert.deepEqual(Array.from(fromNpz.train.labels), expected.y);
  close(fromNpz.train.images, expected.x);
  const fromFiles = await loadDataset(npyConfig({ train: { x: fixture('x_u1.npy'), y: fixture('y_i8.npy') } }).data, {
    ...ctx,
    inputShape: [8],
  });
  close(
    fromFiles.train.images,
    expected.u1.map((v) => v / 255),
  );
  await assert.rejects(
    loadDataset(npyConfig({ train: fixture('xy.npz'), arrays: { x: 'features', y: 'y' } }).data, ctx),
    /data\.arrays\.x: .*xy\.npz has no array "features"; it holds x, y/,
  );
  await assert.rejects(
    loadDataset(npyConfig({ train: fixture('x_f4.npy') }).data, ctx),
    /data\.train: .*x_f4\.npy is not an \.npz archive; one \.npy holds one array/,
  );
  await assert.rejects(
    loadDataset(npyConfig({ train: { x: fixture('x_f4.npy'), y: fixture('targets_f4.npy') } }).data, ctx),
    /targets_f4\.npy: labels have shape \(3, 2\); classification takes one class index per sample/,
  );
  const dir = tmpDir();
  writeFileSync(join(dir, 'y.npy'), encodeNpy('f4', [3], [0, 1.5, 2]));
  await assert.rejects(
    loadDataset(npyConfig({ train: { x: fixture('x_f4.npy'), y: 'y.npy' }, dir }).data, ctx),
    /y\.npy: label 1\.5 of sample 1 is not a class index .*set data\.task: regression/,
  );
  writeFileSync(join(dir, 'y2.npy'), encodeNpy('i4', [2], [0, 1]));
  await assert.rejects(
    loadDataset(npyConfig({ train: { x: fixture('x_f4.npy'), y: 'y2.npy' }, dir }).data, ctx),
    /x_f4\.npy has 3 samples but .*y2\.npy has 2 labels/,
  );
});

test('dataset npy: regression targets [N, k], an npz made here, a validation npz', async () => {
  const dir = tmpDir();
  const x = Array.from({ length: 12 }, (_, i) => i / 2);
  writeFileSync(
    join(dir, 'train.npz'),
    zipSync({ 'x.npy': encodeNpy('f8', [6, 2], x), 'y.npy': encodeNpy('f4', [6, 1], [1, 2, 3, 4, 5, 6]) }),
  );
  writeFileSync(
    join(dir, 'val.npz'),
    zipSync({ 'x.npy': encodeNpy('f4', [2, 2], [1, 2, 3, 4]), 'y.npy': encodeNpy('f4', [2, 1], [9, 8]) }),
  );
  const spec = parseConfig({
    model: { input: [2], layers: [{ dense: { units: 1 } }] },
    data: { dataset: 'npy', task: 'regression', train: 'train.npz', validation: 'val.npz', dir },
  }).data;
  const data = await loadDataset(spec, { inputShape: [2], seed: 1 });
  assert.equal(data.train.task, 'regression');
  assert.equal(data.train.targetSize, 1);
  assert.deepEqual(Array.from(data.train.targets!), [1, 2, 3, 4, 5, 6]);
  assert.deepEqual(Array.from(data.train.images), x);
  assert.deepEqual(Array.from(data.validation!.targets!), [9, 8]);
  assert.equal(data.test, undefined);
});
