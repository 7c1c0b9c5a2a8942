import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { checkReachability, LIBRARY_ENTRIES, TOOL_FOLDERS } from './reachability.ts';

const REPO = fileURLToPath(new URL('../../', import.meta.url));

test('every file of src/ is reached from the entry points, not only from tests', (t) => {
  const r = checkReachability(REPO);
  // informational: files that only the benchmarks or scripts use are allowed, but worth knowing
  if (r.onlyByTools.length > 0)
    t.diagnostic(`reached only from ${TOOL_FOLDERS.join('/, ')}/: ${r.onlyByTools.join(', ')}`);
  const lines = r.unreached.map((f) => {
    const users = r.testUsers.get(f);
    return `${f} — ${users ? `reached only by tests: ${users.join(', ')}` : 'reached by nothing'}`;
  });
  assert.deepEqual(
    r.unreached,
    [],
    `files of src/ that nothing but tests reaches from ${[...LIBRARY_ENTRIES, ...TOOL_FOLDERS.map((f) => `${f}/`)].join(', ')}` +
      ` (wire them in or delete them):\n  ${lines.join('\n  ')}\n`,
  );
});

test('the reachability check follows imports, dynamic imports and worker URLs, and names what only tests reach', () => {
  const root = mkdtempSync(join(tmpdir(), 'paratrain-reach-'));
  const files: Record<string, string> = {
    'src/index.ts': `export * from './lib/a.ts';\n`,
    'src/cli/main.ts': `import type { A } from '../lib/typesOnly.ts';\nexport const lazy = (): Promise<unknown> => import('../lib/lazy.ts');\nexport type { A };\n`,
    'src/lib/a.ts':
      `declare function spawnModuleWorker(url: string, stem: string, data: unknown): void;\n` +
      `export const w = () => spawnModuleWorker(import.meta.url, './worker', {});\n` +
      `export const child = new URL(\`./child\${'.ts'}\`, import.meta.url);\n`,
    'src/lib/worker.ts': `export {};\n`,
    'src/lib/child.ts': `export {};\n`,
    'src/lib/lazy.ts': `export {};\n`,
    'src/lib/typesOnly.ts': `export type A = number;\n`,
    'src/lib/forBench.ts': `export {};\n`,
    'src/lib/dead.ts': `// import './a.ts' in a comment reaches nothing\nexport {};\n`,
    'src/lib/orphan.ts': `export {};\n`,
    'bench/main.ts': `import '../src/lib/forBench.ts';\n`,
    'test/lib/dead.test.ts': `import '../../src/lib/dead.ts';\n`,
  };
  try {
    for (const [path, text] of Object.entries(files)) {
      mkdirSync(dirname(join(root, path)), { recursive: true });
      writeFileSync(join(root, path), text);
    }
    const r = checkReachability(root);
    assert.deepEqual(r.unreached, ['src/lib/dead.ts', 'src/lib/orphan.ts']);
    assert.deepEqual(r.onlyByTools, ['src/lib/forBench.ts']);
    assert.deepEqual([...r.testUsers], [['src/lib/dead.ts', ['test/lib/dead.test.ts']]]);
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
});
