import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { gzipSync } from 'node:zlib';
import { encodeIdx, parseIdx, readIdxFile, readIdxImagesAndLabels } from '../../src/data/idx.ts';
import { tinyPair, tmpDir } from './helpers.ts';

test('parses a raw IDX file built by hand', () => {
  const dir = tmpDir();
  // 00 00 08 02 | 2 | 3 | six bytes
  const bytes = new Uint8Array([0, 0, 8, 2, 0, 0, 0, 2, 0, 0, 0, 3, 1, 2, 3, 4, 5, 255]);
  const path = join(dir, 'a-idx2-ubyte');
  writeFileSync(path, bytes);
  const idx = readIdxFile(path);
  assert.deepEqual(idx.dims, [2, 3]);
  assert.deepEqual([...idx.data], [1, 2, 3, 4, 5, 255]);
});

test('parses a gzipped IDX file (detected by magic, not by name)', () => {
  const dir = tmpDir();
  const data = Uint8Array.from({ length: 4 * 5 * 6 }, (_, i) => i);
  const path = join(dir, 'no-gz-suffix');
  writeFileSync(path, gzipSync(encodeIdx([4, 5, 6], data)));
  const idx = readIdxFile(path);
  assert.deepEqual(idx.dims, [4, 5, 6]);
  assert.deepEqual(idx.data, data);
});

test('large dims are big-endian uint32', () => {
  const idx = parseIdx(encodeIdx([0x0102], new Uint8Array(0x0102)), 'x');
  assert.deepEqual(idx.dims, [258]);
});

test('truncated file names the file and both sizes', () => {
  const dir = tmpDir();
  const path = join(dir, 'train-images-idx3-ubyte');
  const full = encodeIdx([10, 28, 28], new Uint8Array(10 * 28 * 28));
  writeFileSync(path, full.subarray(0, full.length - 100));
  assert.throws(
    () => readIdxFile(path),
    (err: Error) => {
      assert.match(
        err.message,
        /train-images-idx3-ubyte: truncated IDX file: dims 10×28×28 need 7840 bytes of data, found 7740; replace it/,
      );
      assert.ok(!err.message.includes('\n'), 'one line');
      return true;
    },
  );
});

test('truncated header is reported', () => {
  assert.throws(
    () => parseIdx(new Uint8Array([0, 0, 8, 3, 0, 0]), 'f'),
    /f: truncated IDX file: header needs 16 bytes for 3 dimensions, found 6/,
  );
  assert.throws(() => parseIdx(new Uint8Array([0, 0]), 'f'), /f: truncated IDX file: 2 bytes, too short/);
});

test('bad magic number is reported with the bytes found', () => {
  const dir = tmpDir();
  const path = join(dir, 'not-idx');
  writeFileSync(path, new TextEncoder().encode('hello world, not an IDX file'));
  assert.throws(
    () => readIdxFile(path),
    /not-idx: bad magic number \(first bytes 68 65 6c 6c, expected 00 00 08 <ndim>\): not an IDX file/,
  );
});

test('non-ubyte types are rejected clearly', () => {
  assert.throws(
    () => parseIdx(new Uint8Array([0, 0, 0x0d, 1, 0, 0, 0, 1, 0, 0, 0, 0]), 'floats'),
    /floats: IDX value type 0x0d \(float32\) is not supported; paratrain reads unsigned-byte \(0x08\)/,
  );
});

test('extra bytes after the data are rejected', () => {
  const bytes = new Uint8Array([...encodeIdx([2], new Uint8Array([1, 2])), 9]);
  assert.throws(() => parseIdx(bytes, 'f'), /f: IDX file too long: dims 2 need 2 bytes of data, found 3/);
});

test('corrupt gzip names the file and the fix', () => {
  const dir = tmpDir();
  const gz = gzipSync(encodeIdx([100], new Uint8Array(100).fill(7)));
  const cut = join(dir, 'cut.gz');
  writeFileSync(cut, gz.subarray(0, gz.length - 12));
  assert.throws(
    () => readIdxFile(cut),
    /cut\.gz: bad gzip data \(.*\): the file is damaged or was only partly downloaded; replace it with a fresh copy/,
  );
  const garbled = join(dir, 'garbled.gz');
  const bad = Buffer.from(gz);
  for (let i = 10; i < bad.length - 8; i++) bad[i] = 0xff;
  writeFileSync(garbled, bad);
  assert.throws(() => readIdxFile(garbled), /garbled\.gz: bad gzip data/);
});

test('images/labels pair: count mismatch names both files', () => {
  const dir = tmpDir();
  const a = tinyPair(5),
    b = tinyPair(4);
  writeFileSync(join(dir, 'imgs'), a.images);
  writeFileSync(join(dir, 'lbls'), b.labels);
  assert.throws(
    () => readIdxImagesAndLabels(join(dir, 'imgs'), join(dir, 'lbls')),
    (err: Error) => {
      assert.match(err.message, /imgs has 5 images but .*lbls has 4 labels: the counts must match/);
      return true;
    },
  );
});

test('images/labels pair: wrong dims suggest swapped files', () => {
  const dir = tmpDir();
  const p = tinyPair(3);
  writeFileSync(join(dir, 'imgs'), p.images);
  writeFileSync(join(dir, 'lbls'), p.labels);
  assert.throws(
    () => readIdxImagesAndLabels(join(dir, 'lbls'), join(dir, 'imgs')),
    /lbls: an images file has 3 dimensions \(count × rows × columns\), this one has 1 \(3\); check that the images and labels files are not swapped/,
  );
  const ok = readIdxImagesAndLabels(join(dir, 'imgs'), join(dir, 'lbls'));
  assert.equal(ok.count, 3);
  assert.equal(ok.rows, 2);
  assert.equal(ok.cols, 3);
});
