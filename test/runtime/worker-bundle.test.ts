/**
 * The bundles that device threads, test harnesses and the tests' CLI start from (spawnWorker.ts):
 * each file keeps its own import.meta.url, and a later process takes the last bundle while every
 * source in it hashes the same, without running esbuild again; a changed source, or a changed
 * bundler, makes a new one.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { bundledModule, indexedBundle } from '../../src/runtime/job/spawnWorker.ts';

test('a bundle is reused while its sources are unchanged, by content, and not after a change', async (t) => {
  // inside the repository, so that tsx (and the cache beside it) resolve from the entry
  const cache = fileURLToPath(new URL('../../node_modules/.cache', import.meta.url));
  mkdirSync(cache, { recursive: true });
  const dir = mkdtempSync(join(cache, 'paratrain-bundle-test-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const entry = join(dir, 'entry.ts');
  const dep = join(dir, 'dep.ts');
  writeFileSync(dep, 'export const value: number = 1;\n');
  writeFileSync(
    entry,
    `import { value } from './dep.ts';\nexport const at: string = import.meta.url;\nexport { value };\n`,
  );

  const made = bundledModule(pathToFileURL(entry).href);
  assert.ok(made, 'bundled');
  t.after(() => rmSync(dirname(fileURLToPath(made)), { recursive: true, force: true }));
  const mod = (await import(made)) as { at: string; value: number };
  assert.deepEqual({ ...mod }, { at: pathToFileURL(entry).href, value: 1 }, "the entry's own import.meta.url");
  assert.equal(indexedBundle(entry), made, 'unchanged sources: the same bundle, from the index');

  writeFileSync(dep, 'export const value: number = 2;\n');
  assert.equal(indexedBundle(entry), null, 'a changed source is bundled again');
  writeFileSync(dep, 'export const value: number = 1;\n');
  assert.equal(indexedBundle(entry), made, 'by content: the same text again is the same bundle');

  const root = fileURLToPath(new URL('paratrain-workers/', pathToFileURL(`${cache}/`)));
  const indexes = readdirSync(root).filter((f) => f.startsWith('index-'));
  const mine = indexes.find((f) => readFileSync(join(root, f), 'utf8').includes(JSON.stringify(dep)));
  assert.ok(mine, `an index names ${dep}`);
  const index = JSON.parse(readFileSync(join(root, mine), 'utf8')) as { bundler: string };
  writeFileSync(join(root, mine), JSON.stringify({ ...index, bundler: 'another bundler' }));
  assert.equal(indexedBundle(entry), null, 'a changed bundler is not trusted');
  rmSync(join(root, mine));
});
