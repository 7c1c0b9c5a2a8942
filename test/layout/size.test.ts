import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { repoPath, sourceFiles } from './sourceGraph.ts';

const REPO = fileURLToPath(new URL('../../', import.meta.url));
/** docs/architecture.md: small files, one concept each */
const MAX_LINES = 400;

/** Lines as `wc -l` counts them (a last line without a newline still counts). */
const lineCount = (text: string) => (text === '' ? 0 : text.split('\n').length - (text.endsWith('\n') ? 1 : 0));

test(`no file of src/ is over ${MAX_LINES} lines`, () => {
  const over = sourceFiles(join(REPO, 'src'))
    .map((f) => ({ path: repoPath(REPO, f), lines: lineCount(readFileSync(f, 'utf8')) }))
    .filter((f) => f.lines > MAX_LINES)
    .sort((a, b) => b.lines - a.lines)
    .map((f) => `${f.path}: ${f.lines} lines`);
  assert.deepEqual(
    over,
    [],
    `split these into files with one job each (at most ${MAX_LINES} lines):\n  ${over.join('\n  ')}\n`,
  );
});

test('the line count is the one wc -l gives', () => {
  assert.deepEqual(['', 'a', 'a\n', 'a\nb', 'a\nb\n'].map(lineCount), [0, 1, 1, 2, 2]);
});
