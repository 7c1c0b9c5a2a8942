/**
 * PACKAGING TEST. paratrain as a user gets it: dist/ is brought up to date by `npm run build`'s
 * compile (`tsc -p tsconfig.build.json`, incremental: after `npm ci`'s prepare built it from these
 * sources, tsc finds nothing to redo, a few seconds instead of ~30 s of CPU; after an edit it
 * recompiles what changed), the package's files (package.json "files") are staged in a temporary
 * directory, `npm pack` makes the tarball (without dist/.tsbuildinfo), and a separate package
 * installs it with `npm ci --offline` (its lockfile lists the tarball and paratrain's dependencies
 * with the versions and integrity hashes of this repository's package-lock.json, so npm takes them
 * from its cache: no network). A TypeScript file there imports 'paratrain', is type-checked against
 * the installed declarations (a misspelt layer option must not compile) and run: defineConfig,
 * train on 2 devices (worker threads started from the compiled package), loadModel and predict.
 * Set PARATRAIN_PACK_TEST=0 to skip it.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { REPO, SUBSET } from '../cli/helpers.ts';

interface LockEntry {
  version: string;
  resolved?: string;
  integrity?: string;
  dependencies?: Record<string, string>;
  [k: string]: unknown;
}

const TSC = join(REPO, 'node_modules', 'typescript', 'bin', 'tsc');
/** Runs a command; a failure carries what it printed (a compiler's errors are on stdout). */
const run = (cmd: string, args: string[], cwd: string) => {
  try {
    return execFileSync(cmd, args, {
      cwd,
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, npm_config_update_notifier: 'false' },
    });
  } catch (e) {
    const { stdout, stderr } = e as { stdout?: string; stderr?: string };
    throw new Error(`${[cmd, ...args].join(' ')} failed:\n${stdout ?? ''}${stderr ?? ''}`);
  }
};

/** dist/ brought up to date by npm run build's compile, then the package's files staged and packed; returns the tarball's path. */
function pack(dir: string): string {
  run(process.execPath, [TSC, '-p', join(REPO, 'tsconfig.build.json')], REPO);
  const stage = join(dir, 'paratrain');
  mkdirSync(stage);
  const pkg = JSON.parse(readFileSync(join(REPO, 'package.json'), 'utf8')) as { files: string[] };
  for (const f of ['package.json', 'README.md', 'LICENSE', ...pkg.files.filter((f) => !f.startsWith('!'))]) {
    if (existsSync(join(REPO, f))) cpSync(join(REPO, f), join(stage, f), { recursive: true });
  }
  // the staged package.json's prepare would rebuild; the compile above is the one npm run build does
  run('npm', ['pack', '--ignore-scripts', '--pack-destination', dir], stage);
  const tarball = readdirSync(dir).find((f) => f.endsWith('.tgz'));
  assert.ok(tarball, 'npm pack made a tarball');
  return join(dir, tarball);
}

/** A lockfile for a package depending on the tarball: paratrain's dependency closure as this repository locks it. */
function userLockfile(tarball: string, name: string): object {
  const lock = JSON.parse(readFileSync(join(REPO, 'package-lock.json'), 'utf8')) as {
    packages: Record<string, LockEntry>;
  };
  const root = lock.packages['']! as LockEntry & { engines?: unknown };
  const packages: Record<string, object> = {
    '': { name, version: '1.0.0', dependencies: { paratrain: `file:${tarball}` } },
    'node_modules/paratrain': {
      version: '0.1.0',
      resolved: `file:${tarball}`,
      license: 'MIT',
      dependencies: root.dependencies,
      bin: { paratrain: 'bin/paratrain.js' },
      integrity: `sha512-${createHash('sha512').update(readFileSync(tarball)).digest('base64')}`,
    },
  };
  const todo = Object.keys(root.dependencies ?? {});
  while (todo.length) {
    const dep = todo.pop()!;
    const key = `node_modules/${dep}`;
    if (packages[key]) continue;
    const entry = lock.packages[key];
    assert.ok(entry, `package-lock.json has no ${key} (a dependency of paratrain)`);
    const {
      dev: _d,
      devOptional: _o,
      peer: _p,
      ...kept
    } = entry as LockEntry & { dev?: boolean; devOptional?: boolean; peer?: boolean };
    packages[key] = kept;
    todo.push(...Object.keys(entry.dependencies ?? {}));
  }
  return { name, version: '1.0.0', lockfileVersion: 3, requires: true, packages };
}

const USER_MAIN = `import { defineConfig, train, loadModel, predict, type StepSummary } from 'paratrain';

const [data, out] = process.argv.slice(2) as [string, string];
const config = defineConfig({
  model: { input: [28, 28, 1], layers: ['flatten', { dense: { units: 10 } }] },
  optimizer: { sgd: { lr: 0.1 } },
  data: { dir: data, batchSize: 16, trainLimit: 64, testLimit: 32 },
  train: { epochs: 1, devices: 2, backend: 'js', evalEvery: 0 },
});
const steps: StepSummary[] = [];
const result = await train(config, { out, onStep: (s) => steps.push(s) });
const model = await loadModel(result.checkpoint);
const [p] = predict(model, [new Float32Array(28 * 28).fill(0.5)]);
// a Prediction is a union by task: narrowing gives its fields without '!'
if (p?.task !== 'classification') throw new Error('expected a classification');
console.log(JSON.stringify({ steps: steps.map((s) => s.devices), testAccuracy: result.testAccuracy, label: p.label, probabilities: p.probabilities.length }));

// @ts-expect-error the installed declarations are real types: a misspelt layer option does not compile
defineConfig({ model: { input: [4], layers: [{ dense: { unit: 3 } }] } });
`;

test('npm pack → npm ci --offline in another package → import paratrain from TypeScript: train, loadModel, predict', {
  skip: process.env.PARATRAIN_PACK_TEST === '0' ? 'PARATRAIN_PACK_TEST=0' : false,
  timeout: 300_000,
}, () => {
  const dir = mkdtempSync(join(tmpdir(), 'paratrain-pack-'));
  const tarball = pack(dir);
  const user = join(dir, 'user');
  mkdirSync(user);
  writeFileSync(
    join(user, 'package.json'),
    JSON.stringify({
      name: 'user-of-paratrain',
      version: '1.0.0',
      private: true,
      type: 'module',
      dependencies: { paratrain: `file:${tarball}` },
    }),
  );
  writeFileSync(join(user, 'package-lock.json'), JSON.stringify(userLockfile(tarball, 'user-of-paratrain')));
  run('npm', ['ci', '--offline', '--ignore-scripts', '--no-audit', '--no-fund'], user);
  assert.ok(
    existsSync(join(user, 'node_modules', 'paratrain', 'dist', 'index.d.ts')),
    'the package ships its declarations',
  );
  assert.ok(
    !existsSync(join(user, 'node_modules', 'paratrain', 'dist', '.tsbuildinfo')),
    "not the compiler's build state",
  );
  writeFileSync(join(user, 'main.ts'), USER_MAIN);
  writeFileSync(
    join(user, 'tsconfig.json'),
    JSON.stringify({
      compilerOptions: {
        target: 'ES2022',
        module: 'NodeNext',
        moduleResolution: 'NodeNext',
        strict: true,
        skipLibCheck: true,
        types: ['node'],
        typeRoots: [join(REPO, 'node_modules', '@types')],
      },
      files: ['main.ts'],
    }),
  );
  run(process.execPath, [TSC, '-p', user], user);
  const output = run(process.execPath, [join(user, 'main.js'), SUBSET, join(dir, 'run')], user);
  const r = JSON.parse(output.trim().split('\n').at(-1)!) as {
    steps: number[];
    testAccuracy: number;
    label: string;
    probabilities: number;
  };
  assert.deepStrictEqual(r.steps, [2, 2], 'two steps, each summed over 2 devices');
  assert.ok(r.testAccuracy >= 0 && r.testAccuracy <= 1);
  assert.ok(
    ['T-shirt/top', 'Trouser', 'Pullover', 'Dress', 'Coat', 'Sandal', 'Shirt', 'Sneaker', 'Bag', 'Ankle boot'].includes(
      r.label,
    ),
    r.label,
  );
  assert.equal(r.probabilities, 10);
});
