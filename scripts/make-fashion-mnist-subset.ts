/**
 * Builds data/fashion-mnist-subset/ from the full Fashion-MNIST release: the first 400 training and
 * the first 100 test images of each class, in file order, as gzipped IDX files with the standard
 * names, plus a README. Deterministic: the same input gives the same files.
 *
 *   node --import tsx scripts/make-fashion-mnist-subset.ts [--from DIR] [--out DIR]
 *
 * DIR defaults to where Debian's dataset-fashion-mnist installs the files.
 */
import { createHash } from 'node:crypto';
import { mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { gunzipSync, gzipSync } from 'node:zlib';
import { checkImagesAndLabels, encodeIdx, isGzip, parseIdx, type IdxArray } from '../src/data/idx.ts';
import {
  DEBIAN_FASHION_MNIST_DIR,
  FASHION_MNIST_CLASSES,
  FASHION_MNIST_FILES,
  FASHION_MNIST_RAW_MD5,
  findFashionMnistFiles,
} from '../src/data/fashionMnist.ts';

const repoRoot = fileURLToPath(new URL('..', import.meta.url));
const TRAIN_PER_CLASS = 400;
const TEST_PER_CLASS = 100;

function arg(name: string, fallback: string): string {
  const i = process.argv.indexOf(name);
  return i >= 0 && process.argv[i + 1] ? process.argv[i + 1]! : fallback;
}

const md5 = (bytes: Uint8Array): string => createHash('md5').update(bytes).digest('hex');

/** Reads one file of the release and checks its decompressed content against the published MD5. */
function readVerified(path: string, key: keyof typeof FASHION_MNIST_FILES): IdxArray {
  let bytes: Uint8Array = readFileSync(path);
  if (isGzip(bytes)) bytes = gunzipSync(bytes);
  const actual = md5(bytes);
  if (actual !== FASHION_MNIST_RAW_MD5[key]) {
    throw new Error(
      `${path}: content MD5 ${actual} differs from the published ${FASHION_MNIST_RAW_MD5[key]}: not the original Fashion-MNIST file`,
    );
  }
  return parseIdx(bytes, path);
}

/** The first `perClass` samples of each class, in file order. */
function selectFirstPerClass(
  images: IdxArray,
  labels: IdxArray,
  perClass: number,
  what: string,
): { images: IdxArray; labels: IdxArray } {
  const [count, rows, cols] = images.dims as [number, number, number];
  const size = rows * cols;
  const classes = FASHION_MNIST_CLASSES.length;
  const taken = new Array<number>(classes).fill(0);
  const keep: number[] = [];
  for (let i = 0; i < count && keep.length < perClass * classes; i++) {
    const label = labels.data[i]!;
    if (taken[label]! < perClass) {
      taken[label]!++;
      keep.push(i);
    }
  }
  if (taken.some((t) => t !== perClass))
    throw new Error(`${what}: could not find ${perClass} samples of every class (got ${taken.join(', ')})`);
  const outImages = new Uint8Array(keep.length * size);
  const outLabels = new Uint8Array(keep.length);
  keep.forEach((i, k) => {
    outImages.set(images.data.subarray(i * size, (i + 1) * size), k * size);
    outLabels[k] = labels.data[i]!;
  });
  return {
    images: { dims: [keep.length, rows, cols], data: outImages },
    labels: { dims: [keep.length], data: outLabels },
  };
}

function main(): void {
  const from = arg('--from', DEBIAN_FASHION_MNIST_DIR);
  const out = arg('--out', join(repoRoot, 'data', 'fashion-mnist-subset'));
  const { paths, missing } = findFashionMnistFiles(from);
  if (missing.length)
    throw new Error(`${from} lacks ${missing.join(', ')}; install dataset-fashion-mnist or pass --from DIR`);
  const p = paths as Record<keyof typeof FASHION_MNIST_FILES, string>;

  const trainImages = readVerified(p.trainImages, 'trainImages');
  const trainLabels = readVerified(p.trainLabels, 'trainLabels');
  const testImages = readVerified(p.testImages, 'testImages');
  const testLabels = readVerified(p.testLabels, 'testLabels');
  checkImagesAndLabels(trainImages, trainLabels, p.trainImages, p.trainLabels);
  checkImagesAndLabels(testImages, testLabels, p.testImages, p.testLabels);

  const train = selectFirstPerClass(trainImages, trainLabels, TRAIN_PER_CLASS, 'train');
  const test = selectFirstPerClass(testImages, testLabels, TEST_PER_CLASS, 'test');

  mkdirSync(out, { recursive: true });
  const written: { name: string; bytes: number; raw: number; rawMd5: string }[] = [];
  const write = (name: string, array: IdxArray): void => {
    const raw = encodeIdx(array.dims, array.data);
    // zlib's gzip header carries no timestamp or name, so the bytes are reproducible
    const gz = gzipSync(raw, { level: 9 });
    const file = join(out, `${name}.gz`);
    writeFileSync(file, gz);
    written.push({ name: `${name}.gz`, bytes: statSync(file).size, raw: raw.length, rawMd5: md5(raw) });
  };
  write(FASHION_MNIST_FILES.trainImages, train.images);
  write(FASHION_MNIST_FILES.trainLabels, train.labels);
  write(FASHION_MNIST_FILES.testImages, test.images);
  write(FASHION_MNIST_FILES.testLabels, test.labels);

  const total = written.reduce((a, w) => a + w.bytes, 0);
  const table = written
    .map(
      (w) =>
        `| \`${w.name}\` | ${w.bytes.toLocaleString('en-US')} | ${w.raw.toLocaleString('en-US')} | \`${w.rawMd5}\` |`,
    )
    .join('\n');
  const readme = `# Fashion-MNIST subset

A small, class-balanced subset of Fashion-MNIST that ships with paratrain so that its default run and
its tests work offline. For real training use the full dataset: install Debian's
\`dataset-fashion-mnist\` (paratrain finds it in \`${DEBIAN_FASHION_MNIST_DIR}\`) or set \`data.dir\`.

- **Source:** Fashion-MNIST by Zalando Research, https://github.com/zalandoresearch/fashion-mnist
  (Han Xiao, Kashif Rasul, Roland Vollgraf, "Fashion-MNIST: a Novel Image Dataset for Benchmarking
  Machine Learning Algorithms", arXiv:1708.07747, 2017).
- **Licence:** MIT. The MIT License (MIT) Copyright © [2017] Zalando SE, https://tech.zalando.com
  — the permission notice is in LICENSE beside this file.
- **Content:** ${(TRAIN_PER_CLASS * 10).toLocaleString('en-US')} training images (the first ${TRAIN_PER_CLASS} of each of the 10 classes in
  \`train-images-idx3-ubyte\`, kept in file order) and ${(TEST_PER_CLASS * 10).toLocaleString('en-US')} test images (the first ${TEST_PER_CLASS} of each class in
  \`t10k-images-idx3-ubyte\`, in file order), 28×28 greyscale, labels 0–9:
  ${FASHION_MNIST_CLASSES.map((c, i) => `${i} ${c}`).join(', ')}.
- **How it was made:** \`node --import tsx scripts/make-fashion-mnist-subset.ts\` from the full release in
  \`${from}\`, after checking each input file's decompressed MD5 against the published
  ones. Gzipped IDX files with the standard names; the script is deterministic.

| file | bytes on disk | bytes decompressed | MD5 of the decompressed IDX |
| --- | ---: | ---: | --- |
${table}

Total on disk: ${total.toLocaleString('en-US')} bytes.
`;
  writeFileSync(join(out, 'README.md'), readme);
  writeFileSync(join(out, 'LICENSE'), LICENSE);
  for (const w of written) console.log(`${join(out, w.name)}: ${w.bytes} bytes`);
  console.log(`total ${total} bytes`);
}

const LICENSE = `The MIT License (MIT) Copyright © [2017] Zalando SE, https://tech.zalando.com

Permission is hereby granted, free of charge, to any person obtaining a copy of this software and associated documentation files (the “Software”), to deal in the Software without restriction, including without limitation the rights to use, copy, modify, merge, publish, distribute, sublicense, and/or sell copies of the Software, and to permit persons to whom the Software is furnished to do so, subject to the following conditions:

The above copyright notice and this permission notice shall be included in all copies or substantial portions of the Software.

THE SOFTWARE IS PROVIDED “AS IS”, WITHOUT WARRANTY OF ANY KIND, EXPRESS OR IMPLIED, INCLUDING BUT NOT LIMITED TO THE WARRANTIES OF MERCHANTABILITY, FITNESS FOR A PARTICULAR PURPOSE AND NONINFRINGEMENT. IN NO EVENT SHALL THE AUTHORS OR COPYRIGHT HOLDERS BE LIABLE FOR ANY CLAIM, DAMAGES OR OTHER LIABILITY, WHETHER IN AN ACTION OF CONTRACT, TORT OR OTHERWISE, ARISING FROM, OUT OF OR IN CONNECTION WITH THE SOFTWARE OR THE USE OR OTHER DEALINGS IN THE SOFTWARE.
`;

main();
