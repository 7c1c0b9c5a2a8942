import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { importCycles } from './cycleCheck.ts';

const REPO = fileURLToPath(new URL('../../', import.meta.url));

test('no import cycle in src/ (type-only imports count)', () => {
  const cycles = importCycles(join(REPO, 'src')).map((c) => c.map((f) => relative(REPO, f)).join(' → '));
  assert.deepEqual(cycles, [], `cut one import of each cycle:\n  ${cycles.join('\n  ')}`);
});

test('src/runtime/ holds rooms only: every file is in a sub-folder', () => {
  const dir = join(REPO, 'src', 'runtime');
  const loose = readdirSync(dir).filter((n) => !statSync(join(dir, n)).isDirectory());
  assert.deepEqual(
    loose,
    [],
    'move each file into the room (sub-folder) of its concept, and give a new room a row in docs/architecture.md',
  );
});

test('the cycle check finds a cycle through three files and a type-only import, and passes a tree without one', () => {
  const root = mkdtempSync(join(tmpdir(), 'paratrain-cycles-'));
  const write = (path: string, text: string) => {
    mkdirSync(dirname(join(root, path)), { recursive: true });
    writeFileSync(join(root, path), text);
  };
  try {
    write('a.ts', `import { b } from './b.ts';\nexport const a = b;\n`);
    write('b.ts', `import { c } from './sub/c.ts';\nexport const b = c;\n`);
    write('sub/c.ts', `import type { A } from '../a.ts';\nexport const c = 1 as unknown as A;\n`);
    write('d.ts', `import { a } from './a.ts';\nexport const d = a;\n`);
    const cycles = importCycles(root).map((c) => c.map((f) => relative(root, f)));
    assert.deepEqual(cycles, [['a.ts', 'b.ts', join('sub', 'c.ts'), 'a.ts']]);
    write('sub/c.ts', `export const c = 1;\n`);
    assert.deepEqual(importCycles(root), []);
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
});
