/**
 * `dataset: idx`: any images + labels pair of IDX files (MNIST's format: KMNIST, EMNIST, a set of
 * your own), with any number of classes: the count comes from the labels (or data.classNames).
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import type { Dataset } from './dataset.ts';
import { readIdxFile } from './idx.ts';
import { resolveDataPath } from './files.ts';
import type { IdxPairSpec } from './spec.ts';

/** The MNIST release's file names, the defaults of data.train and data.test. */
export const IDX_DEFAULTS = {
  train: { images: 'train-images-idx3-ubyte', labels: 'train-labels-idx1-ubyte' },
  test: { images: 't10k-images-idx3-ubyte', labels: 't10k-labels-idx1-ubyte' },
} as const;

/** A default file: its raw name or its .gz, whichever is in `dir` (undefined when neither). */
export function findIdxFile(name: string, dir: string | undefined): string | undefined {
  const base = resolveDataPath(name, dir);
  return [base, `${base}.gz`].find((p) => existsSync(p));
}

/** An images + labels pair of IDX files as a Dataset (bytes scaled by 1/255; classes set by the caller). */
export function loadIdxPair(pair: IdxPairSpec, field: string): Dataset {
  for (const [key, path] of Object.entries(pair)) {
    if (!existsSync(path))
      throw new Error(
        `${field}.${key}: IDX file ${path} not found; check the path (relative paths start at data.dir: a config file's own folder unless it sets another)`,
      );
  }
  const images = readIdxFile(pair.images);
  const labels = readIdxFile(pair.labels);
  if (images.dims.length < 2) {
    throw new Error(
      `${pair.images}: an images file has a sample axis and at least one more (count × rows × columns), this one has ${images.dims.length} (${images.dims.join('×')}); check that the images and labels files are not swapped`,
    );
  }
  if (labels.dims.length !== 1) {
    throw new Error(
      `${pair.labels}: a labels file has 1 dimension (count), this one has ${labels.dims.length} (${labels.dims.join('×')}); check that the images and labels files are not swapped`,
    );
  }
  const count = images.dims[0]!;
  if (labels.dims[0] !== count) {
    throw new Error(
      `${pair.images} has ${count} images but ${pair.labels} has ${labels.dims[0]} labels: the counts must match; use the images and labels files of the same split`,
    );
  }
  // [N, H, W] is greyscale [H, W, 1]; [N, H, W, C] and [N, F] stay as they are
  const rest = images.dims.slice(1);
  const sampleShape = rest.length === 2 ? [...rest, 1] : rest;
  const table = new Float32Array(256);
  for (let b = 0; b < 256; b++) table[b] = b / 255;
  const src = images.data,
    out = new Float32Array(src.length);
  for (let i = 0; i < src.length; i++) out[i] = table[src[i]!]!;
  return {
    name: pair.images,
    images: out,
    labels: Int32Array.from(labels.data),
    count,
    sampleShape,
    classes: 0,
    task: 'classification',
  };
}

/** The configured pair, or the MNIST-named default in data.dir (`optional`: absent when not there). */
export function idxPairOf(
  given: IdxPairSpec | undefined,
  which: 'train' | 'test',
  dir: string | undefined,
): IdxPairSpec | undefined {
  if (given) return { images: resolveDataPath(given.images, dir), labels: resolveDataPath(given.labels, dir) };
  const d = IDX_DEFAULTS[which];
  const images = findIdxFile(d.images, dir),
    labels = findIdxFile(d.labels, dir);
  if (images && labels) return { images, labels };
  if (which === 'test') return undefined;
  throw new Error(
    `data.train: no IDX files given and ${join(dir ?? '.', d.images)}[.gz] / ${d.labels}[.gz] are not there; set data.train: { images: FILE, labels: FILE } (or data.dir to the folder of an MNIST-style release)`,
  );
}
