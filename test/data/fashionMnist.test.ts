import assert from 'node:assert/strict';
import { existsSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import {
  FASHION_MNIST_SUBSET_DIR,
  defaultFashionMnistCacheDir,
  findFashionMnistFiles,
  loadFashionMnist,
} from '../../src/data/fashionMnist.ts';
import { tmpDir, writeFakeRelease } from './helpers.ts';

const quiet = { log: () => {} };

test('explicit dir with raw files', async () => {
  const dir = tmpDir();
  writeFakeRelease(dir, { train: 12, test: 5 });
  const { train, test: t, source } = await loadFashionMnist({ dir, ...quiet });
  assert.equal(train.count, 12);
  assert.equal(t.count, 5);
  assert.deepEqual(train.sampleShape, [28, 28, 1]);
  assert.equal(train.images.length, 12 * 784);
  assert.equal(train.classes, 10);
  assert.ok(source.includes(dir));
  // pixel p of sample i is (i*10 + p) % 256, scaled to [0, 1]
  assert.equal(train.images[3 * 784 + 5], Math.fround(((3 * 10 + 5) % 256) / 255));
  assert.equal(train.labels[7], 7);
});

test('explicit dir with .gz files', async () => {
  const dir = tmpDir();
  writeFakeRelease(dir, { train: 3, test: 2, gz: true });
  const { train, test: t } = await loadFashionMnist({ dir, ...quiet });
  assert.equal(train.count, 3);
  assert.equal(t.count, 2);
});

test('explicit dir that does not exist gets its own message', async () => {
  const dir = join(tmpDir(), 'nope');
  await assert.rejects(loadFashionMnist({ dir, ...quiet }), (err: Error) => {
    assert.equal(
      err.message,
      `Fashion-MNIST directory ${dir} does not exist; fix --data (or data.dir in the config), or leave it out to use the installed, cached or shipped copy`,
    );
    return true;
  });
});

test('explicit dir with missing files lists them', async () => {
  const dir = tmpDir();
  writeFakeRelease(dir, { skip: ['train-labels-idx1-ubyte', 't10k-images-idx3-ubyte'] });
  await assert.rejects(loadFashionMnist({ dir, ...quiet }), (err: Error) => {
    assert.equal(
      err.message,
      `Fashion-MNIST directory ${dir} lacks train-labels-idx1-ubyte[.gz], t10k-images-idx3-ubyte[.gz]; put the four IDX files of the release there (raw or .gz)`,
    );
    return true;
  });
});

test('an explicit dir is never silently replaced by another source', async () => {
  const dir = tmpDir();
  await assert.rejects(
    loadFashionMnist({ dir, systemDirs: [], ...quiet }),
    /lacks train-images-idx3-ubyte\[\.gz\], train-labels-idx1-ubyte\[\.gz\], t10k-images/,
  );
});

test('the shipped subset: 4000 train / 1000 test, 400 / 100 per class', async () => {
  assert.equal(findFashionMnistFiles(FASHION_MNIST_SUBSET_DIR).missing.length, 0);
  const { train, test: t } = await loadFashionMnist({ dir: FASHION_MNIST_SUBSET_DIR, ...quiet });
  assert.equal(train.count, 4000);
  assert.equal(t.count, 1000);
  for (const [ds, per] of [
    [train, 400],
    [t, 100],
  ] as const) {
    assert.equal(ds.classes, 10);
    assert.deepEqual(ds.sampleShape, [28, 28, 1]);
    const perClass = new Array(10).fill(0);
    for (const l of ds.labels) perClass[l]++;
    assert.deepEqual(perClass, new Array(10).fill(per));
    let min = Infinity,
      max = -Infinity;
    for (const v of ds.images) {
      if (v < min) min = v;
      if (v > max) max = v;
    }
    assert.equal(min, 0);
    assert.equal(max, 1);
  }
});

test('lookup falls through an empty cache to the shipped subset when downloads are off', async () => {
  const cacheDir = tmpDir();
  const lines: string[] = [];
  const { train, source } = await loadFashionMnist({
    systemDirs: [join(cacheDir, 'absent')],
    cacheDir,
    allowDownload: false,
    log: (m) => lines.push(m),
  });
  assert.equal(train.count, 4000);
  assert.match(source, /^shipped subset .*fashion-mnist-subset/);
  assert.deepEqual(lines, [], 'nothing to say when downloads are off');
});

test('PARATRAIN_OFFLINE=1 disables downloading', async () => {
  const cacheDir = tmpDir();
  const saved = process.env.PARATRAIN_OFFLINE;
  process.env.PARATRAIN_OFFLINE = '1';
  try {
    const lines: string[] = [];
    const { source } = await loadFashionMnist({ systemDirs: [], cacheDir, log: (m) => lines.push(m) });
    assert.match(source, /^shipped subset/);
    assert.deepEqual(lines, []);
  } finally {
    if (saved === undefined) delete process.env.PARATRAIN_OFFLINE;
    else process.env.PARATRAIN_OFFLINE = saved;
  }
});

test('a system dir holding the files comes before the cache and the subset', async () => {
  const sys = tmpDir();
  writeFakeRelease(sys, { train: 7, test: 3, gz: true });
  const { train, source } = await loadFashionMnist({
    systemDirs: [sys],
    cacheDir: tmpDir(),
    allowDownload: false,
    ...quiet,
  });
  assert.equal(train.count, 7);
  assert.ok(source.startsWith(sys));
});

test('a filled cache is used without downloading', async () => {
  const cacheDir = join(tmpDir(), 'cache');
  mkdirSync(cacheDir);
  writeFakeRelease(cacheDir, { train: 9, test: 4, gz: true });
  const { train, source } = await loadFashionMnist({ systemDirs: [], cacheDir, allowDownload: false, ...quiet });
  assert.equal(train.count, 9);
  assert.match(source, /^download cache /);
});

test('default cache dir follows PARATRAIN_CACHE, then XDG_CACHE_HOME', () => {
  assert.equal(defaultFashionMnistCacheDir({ PARATRAIN_CACHE: '/c' }), join('/c', 'fashion-mnist'));
  assert.equal(defaultFashionMnistCacheDir({ XDG_CACHE_HOME: '/x' }), join('/x', 'paratrain', 'fashion-mnist'));
  assert.match(defaultFashionMnistCacheDir({}), /\.cache[/\\]paratrain[/\\]fashion-mnist$/);
});

test('the subset directory resolves from the module location', () => {
  assert.ok(existsSync(join(FASHION_MNIST_SUBSET_DIR, 'README.md')));
});
