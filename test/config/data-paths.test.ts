/**
 * A config file's relative data paths start at its own folder: loadConfig makes data.dir absolute
 * (the folder, or a relative data.dir under it) for the types whose files the config names, keeps
 * absolute paths, leaves fashion-mnist's and speech's absent dir absent and memory names alone;
 * `--data` (applied after) still replaces data.dir.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { applyOverrides, loadConfig } from '../../src/config/index.ts';
import { tmpDir } from '../data/helpers.ts';

const MODEL = 'model: { input: [2], layers: [{ dense: { units: 3 } }] }\n';

function configIn(folder: string, data: string): string {
  mkdirSync(folder, { recursive: true });
  const file = join(folder, 'c.yaml');
  writeFileSync(file, `${MODEL}data: ${data}\n`);
  return file;
}

test("loadConfig: relative data paths start at the config file's folder; absolute ones stay", () => {
  const root = tmpDir();
  const folder = join(root, 'project', 'configs');
  const dataOf = (data: string) => loadConfig(configIn(folder, data)).data as unknown as Record<string, unknown>;
  assert.deepEqual(
    [dataOf('{ dataset: csv, train: a.csv }').dir, dataOf('{ dataset: csv, train: a.csv }').train],
    [folder, 'a.csv'],
    'no data.dir: the folder; the file name stays relative to it',
  );
  assert.equal(dataOf('{ dataset: npy, dir: ../data, train: a.npz }').dir, join(root, 'project', 'data'));
  assert.equal(dataOf('{ dataset: imageFolder, dir: /srv/images, train: t }').dir, '/srv/images');
  assert.equal(dataOf('{ dataset: idx }').dir, folder);
  assert.equal(dataOf('{ dataset: fashion-mnist }').dir, undefined, 'absent: the lookup order of the README');
  assert.equal(dataOf('{ dataset: fashion-mnist, dir: fm }').dir, join(folder, 'fm'));
  const speech = dataOf('{ dataset: speech, cacheDir: cache }');
  assert.deepEqual([speech.dir, speech.cacheDir], [undefined, join(folder, 'cache')]);
  assert.equal(dataOf('{ dataset: memory, train: mine }').dir, undefined);
  const overridden = applyOverrides(loadConfig(configIn(folder, '{ dataset: csv, train: a.csv }')), {
    dataDir: '/elsewhere',
  });
  assert.equal((overridden.data as { dir?: string }).dir, '/elsewhere', '--data replaces it');
});
