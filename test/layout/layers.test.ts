import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ARCHITECTURE_DOC, checkLayers, layerOf, parseLayerTable, type LayerReport } from './layerCheck.ts';

const REPO = fileURLToPath(new URL('../../', import.meta.url));
const list = (lines: string[]) => `\n  ${lines.join('\n  ')}\n`;
let cached: LayerReport | undefined;
/** The repository's report, computed once for the three tests that read it. */
const repoReport = () => (cached ??= checkLayers(REPO));

test(`every folder and file of src/ has a layer in ${ARCHITECTURE_DOC}`, () => {
  const r = repoReport();
  const missing = [...r.unlistedFolders, ...r.unlayeredFiles];
  assert.deepEqual(missing, [], `add a row (or the folder to a row) of the layer table:${list(missing)}`);
});

test(`every folder and file the layer table of ${ARCHITECTURE_DOC} names exists`, () => {
  const r = repoReport();
  assert.deepEqual(r.missingEntries, [], `keep the table true to src/:${list(r.missingEntries)}`);
});

test('no import in src/ points up the layer table', () => {
  const r = repoReport();
  assert.deepEqual(r.upward, [], `move the code or the import so it points down:${list(r.upward)}`);
});

// The check checks itself: on a tiny tree it must find what it is there to find.

function writeTree(files: Record<string, string>): string {
  const root = mkdtempSync(join(tmpdir(), 'paratrain-layers-'));
  for (const [path, text] of Object.entries(files)) {
    mkdirSync(dirname(join(root, path)), { recursive: true });
    writeFileSync(join(root, path), text);
  }
  return root;
}

const DOC = `# layers

| rank | folders | owns |
| --- | --- | --- |
| 0 | \`src/low/\` | the bottom |
| 1 | \`src/high/\`, \`src/high/sub/\` | above it |
| 1.5 | \`src/index.ts\` | the entry |

| rank | not the layer table | |
`;

test('the layer table parser reads ranks (3.5 too), folders and single files, and the most specific entry wins', () => {
  const entries = parseLayerTable(DOC);
  assert.deepEqual(
    entries.map((e) => [e.path, e.folder, e.rank]),
    [
      ['src/low', true, 0],
      ['src/high', true, 1],
      ['src/high/sub', true, 1],
      ['src/index.ts', false, 1.5],
    ],
  );
  assert.equal(layerOf(entries, 'src/high/sub/x.ts')?.path, 'src/high/sub');
  assert.equal(layerOf(entries, 'src/index.ts')?.rank, 1.5);
  assert.equal(layerOf(entries, 'src/other.ts'), null);
  assert.throws(() => parseLayerTable('no table here'), /no layer table/);
  assert.throws(
    () => parseLayerTable('| rank | f |\n| - | - |\n| x | `src/a/` |'),
    /:3: layer rank 'x' is not a number/,
  );
});

test('the layer check fails on an upward import, dynamic import and worker URL, naming file, import and both layers', () => {
  const root = writeTree({
    [ARCHITECTURE_DOC]: DOC,
    'src/index.ts': `import { b } from './high/b.ts';\nexport { b };\n`,
    'src/low/a.ts': [
      `// import { b } from '../high/b.ts'  (a comment is not an import)`,
      `import type { B } from '../high/b.ts';`,
      `export const a = 1 as unknown as B;`,
      `export const lazy = () => import('../high/b.ts');`,
      `export const worker = new URL('../high/sub/w.ts', import.meta.url);`,
      `export const down = "import '../high/b.ts'";`,
    ].join('\n'),
    'src/high/b.ts': `import { a } from '../low/a.ts';\nexport type B = number;\nexport const b = a;\n`,
    'src/high/sub/w.ts': `export {};\n`,
    'src/stray/c.ts': `export {};\n`,
    'src/loose.ts': `export {};\n`,
  });
  try {
    const r = checkLayers(root);
    assert.deepEqual(r.upward, [
      `src/low/a.ts:2 imports '../high/b.ts': layer src/low/, rank 0 → layer src/high/, rank 1 points up the table`,
      `src/low/a.ts:4 imports dynamically '../high/b.ts': layer src/low/, rank 0 → layer src/high/, rank 1 points up the table`,
      `src/low/a.ts:5 starts by URL '../high/sub/w.ts': layer src/low/, rank 0 → layer src/high/sub/, rank 1 points up the table`,
    ]);
    assert.deepEqual(r.unlistedFolders, [`src/stray/ has no row in the layer table of ${ARCHITECTURE_DOC}`]);
    assert.deepEqual(r.unlayeredFiles, [
      `src/loose.ts is in no layer of ${ARCHITECTURE_DOC}`,
      `src/stray/c.ts is in no layer of ${ARCHITECTURE_DOC}`,
    ]);
    assert.deepEqual(r.missingEntries, []);
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
});

test('the layer check passes a tree whose imports point down, and flags a table row naming no existing folder', () => {
  const root = writeTree({
    [ARCHITECTURE_DOC]: DOC,
    'src/index.ts': `export { b } from './high/b.ts';\n`,
    'src/low/a.ts': `export const a = 1;\n`,
    'src/high/b.ts': `import { a } from '../low/a.ts';\nexport const b = a;\n`,
  });
  try {
    const r = checkLayers(root);
    assert.deepEqual([r.upward, r.unlistedFolders, r.unlayeredFiles], [[], [], []]);
    assert.deepEqual(r.missingEntries, [`${ARCHITECTURE_DOC}:6 names src/high/sub/, rank 1, which does not exist`]);
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
});
