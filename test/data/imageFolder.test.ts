/** `dataset: imageFolder` on PNGs and JPEGs made here: classes, channels, resizing, and bad folders and files. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { PNG } from 'pngjs';
import jpeg from 'jpeg-js';
import { loadDataset } from '../../src/data/registry.ts';
import { imageToSample } from '../../src/data/imageDecode.ts';
import { parseConfig } from '../../src/config/index.ts';
import { tmpDir } from './helpers.ts';

/** A w×h PNG whose pixel (x, y) is rgba(x·10 + seed, y·10, 100, 255), or grey x·10 + seed. */
function png(w: number, h: number, seed: number, grey = false): Buffer {
  const img = new PNG({ width: w, height: h });
  for (let y = 0; y < h; y++) {
    for (let x = 0; x < w; x++) {
      const o = 4 * (y * w + x),
        v = x * 10 + seed;
      img.data[o] = v;
      img.data[o + 1] = grey ? v : y * 10;
      img.data[o + 2] = grey ? v : 100;
      img.data[o + 3] = 255;
    }
  }
  return PNG.sync.write(img, grey ? { colorType: 0 } : {});
}

function folder(files: Record<string, Buffer | string>): string {
  const dir = tmpDir('paratrain-images-');
  for (const [path, bytes] of Object.entries(files)) {
    mkdirSync(join(dir, path, '..'), { recursive: true });
    writeFileSync(join(dir, path), bytes);
  }
  return dir;
}

function load(dir: string, input: number[], data: Record<string, unknown> = {}) {
  const config = parseConfig({
    model: { input, layers: [{ flatten: {} }, { dense: { units: 2 } }] },
    data: { dataset: 'imageFolder', train: dir, ...data },
  });
  return loadDataset(config.data, { inputShape: input, seed: 1 });
}

test('class names are the sorted folder names; RGB pixels scaled to [0, 1], NHWC; other files skipped', async () => {
  const dir = folder({
    'dog/b.png': png(3, 2, 1),
    'dog/a.png': png(3, 2, 2),
    'cat/1.png': png(3, 2, 3),
    'cat/notes.txt': 'not an image',
  });
  const data = await load(dir, [2, 3, 3]);
  assert.deepEqual(data.train.classNames, ['cat', 'dog']);
  assert.equal(data.train.classes, 2);
  assert.deepEqual(Array.from(data.train.labels), [0, 1, 1]);
  assert.deepEqual(data.train.sampleShape, [2, 3, 3]);
  // sample 1 is dog/a.png (sorted), seed 2: pixel (x=1, y=1) = (12, 10, 100)
  const at = (s: number, y: number, x: number) =>
    Array.from(data.train.images.subarray(s * 18 + (y * 3 + x) * 3, s * 18 + (y * 3 + x) * 3 + 3));
  assert.deepEqual(at(1, 1, 1), [12 / 255, 10 / 255, 100 / 255].map(Math.fround));
});

test('channels follow model.input: grey PNGs as 1 channel, colour as luma, RGBA keeps alpha; JPEG decodes', async () => {
  const dir = folder({
    'a/g.png': png(2, 2, 5, true),
    'b/c.png': png(2, 2, 0),
    'b/j.jpg': jpeg.encode({ width: 2, height: 2, data: Buffer.alloc(16, 200) }, 95).data,
  });
  const grey = await load(dir, [2, 2, 1]);
  assert.equal(grey.train.images[1], Math.fround(15 / 255), 'grey value kept as is');
  assert.ok(
    Math.abs(grey.train.images[4 + 1]! - (0.299 * 10 + 0.587 * 0 + 0.114 * 100) / 255) < 1e-6,
    'luma of a colour pixel',
  );
  assert.ok(Math.abs(grey.train.images[8]! - 200 / 255) < 3 / 255, "the JPEG's grey");
  const rgba = await load(dir, [2, 2, 4]);
  assert.equal(rgba.train.images[3], 1, 'alpha 255 → 1');
});

test('resize: true resizes bilinearly; off, an image of another size is refused naming the file', async () => {
  const dir = folder({ 'a/big.png': png(4, 4, 0), 'b/ok.png': png(2, 2, 0) });
  await assert.rejects(
    load(dir, [2, 2, 3]),
    /a\/big\.png: the image is 4×4 \(width×height\) but model\.input needs 2×2; resize the images, or set data\.resize: true/,
  );
  const data = await load(dir, [2, 2, 3], { resize: true });
  // halving: output pixel x samples input x = 0.5 → between columns 0 and 1: (0·10 + 1·10) / 2 = 5
  assert.ok(Math.abs(data.train.images[0]! - 5 / 255) < 1e-6);
  // a direct check of the interpolation against hand-computed bilinear values
  const out = new Float32Array(3);
  imageToSample(
    { width: 2, height: 1, data: new Uint8Array([0, 0, 0, 255, 255, 255, 255, 255]) },
    [1, 3, 1],
    true,
    'x',
    out,
    0,
  );
  // centres of 3 output columns map to input x = -1/6 (clamped 0), 0.5, 7/6 (clamped 1)
  assert.deepEqual(Array.from(out), [0, 0.5, 1]);
});

test('bad folders and files: an empty class folder, a corrupt PNG, no class folders, a test class training lacks', async () => {
  const empty = folder({ 'a/x.png': png(2, 2, 0), 'b/readme.md': 'nothing here' });
  await assert.rejects(
    load(empty, [2, 2, 3]),
    /b: this class folder holds no \.png or \.jpg images; add images or remove the folder/,
  );
  const corrupt = folder({ 'a/x.png': png(2, 2, 0), 'b/broken.png': png(2, 2, 0).subarray(0, 40) });
  await assert.rejects(
    load(corrupt, [2, 2, 3]),
    /b\/broken\.png: cannot decode this PNG .*; the file is damaged or truncated/,
  );
  const notImage = folder({ 'a/x.png': Buffer.from('hello') });
  await assert.rejects(load(notImage, [2, 2, 3]), /a\/x\.png: not a PNG or JPEG image/);
  const flat = folder({ 'x.png': png(2, 2, 0) });
  await assert.rejects(
    load(flat, [2, 2, 3]),
    /data\.train: .* has no class folders; put each class's images in a sub-folder/,
  );
  await assert.rejects(load(join(flat, 'nope'), [2, 2, 3]), /data\.train: image folder .*nope does not exist/);
  const train = folder({ 'a/x.png': png(2, 2, 0), 'b/y.png': png(2, 2, 0) });
  const test = folder({ 'c/z.png': png(2, 2, 0) });
  await assert.rejects(
    load(train, [2, 2, 3], { test }),
    /data\.test: .*c is a class the training folder does not have \(its classes: a, b\)/,
  );
  await assert.rejects(
    load(train, [12]),
    /model\.input: an image folder is loaded as images of model\.input \[H, W, C\]/,
  );
});

test('a validation folder and a validation fraction', async () => {
  const files: Record<string, Buffer> = {};
  for (let i = 0; i < 10; i++) files[`${i % 2 ? 'odd' : 'even'}/${i}.png`] = png(2, 2, i);
  const dir = folder(files);
  const split = await load(dir, [2, 2, 3], { validation: 0.2 });
  assert.equal(split.train.count, 8);
  assert.equal(split.validation!.count, 2);
  const val = folder({ 'odd/v.png': png(2, 2, 0) });
  const named = await load(dir, [2, 2, 3], { validation: val });
  assert.deepEqual(Array.from(named.validation!.labels), [1]);
  assert.equal(named.train.count, 10);
});
