import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { encodeIdx } from '../../src/data/idx.ts';

export function tmpDir(prefix = 'paratrain-data-'): string {
  return mkdtempSync(join(tmpdir(), prefix));
}

/** A tiny images + labels pair: sample i has every pixel = (i * 10 + p) % 256, label i % classes. */
export function tinyPair(count: number, rows = 2, cols = 3, classes = 10): { images: Uint8Array; labels: Uint8Array } {
  const images = new Uint8Array(count * rows * cols);
  for (let i = 0; i < images.length; i++) images[i] = (Math.floor(i / (rows * cols)) * 10 + (i % (rows * cols))) % 256;
  const labels = new Uint8Array(count);
  for (let i = 0; i < count; i++) labels[i] = i % classes;
  return { images: encodeIdx([count, rows, cols], images), labels: encodeIdx([count], labels) };
}

/** Writes the four Fashion-MNIST files (optionally gzipped) of a tiny fake release into dir. */
export function writeFakeRelease(
  dir: string,
  opts: { train?: number; test?: number; gz?: boolean; skip?: string[] } = {},
): void {
  const { train = 12, test = 5, gz = false, skip = [] } = opts;
  const t = tinyPair(train, 28, 28);
  const v = tinyPair(test, 28, 28);
  const files: [string, Uint8Array][] = [
    ['train-images-idx3-ubyte', t.images],
    ['train-labels-idx1-ubyte', t.labels],
    ['t10k-images-idx3-ubyte', v.images],
    ['t10k-labels-idx1-ubyte', v.labels],
  ];
  for (const [name, bytes] of files) {
    if (skip.includes(name)) continue;
    writeFileSync(join(dir, gz ? `${name}.gz` : name), gz ? gzipSync(bytes) : bytes);
  }
}
