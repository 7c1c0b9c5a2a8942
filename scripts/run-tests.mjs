/**
 * Runs the test files (default: test/<area>/*.test.ts) under Node's test runner, each loaded from
 * an esbuild bundle instead of module by module through tsx's loader hooks: a test process then
 * starts in about half the CPU time, which across the suite's hundreds of files is minutes. The
 * files are bundled together in one build (shared code in shared chunks) into
 * node_modules/.cache/paratrain-tests/<pid>, where packages resolve as from the repository; each source
 * keeps its own import.meta.url and import.meta.dirname, so fixtures beside a test, and the workers
 * and child processes started from src/ (which bring their own bundles or register tsx themselves),
 * behave as under tsx. Source maps point failures at the TypeScript lines.
 *
 *   node scripts/run-tests.mjs [test files…] [-- node --test options…]
 *
 * PARATRAIN_TEST_BUNDLE=0 runs the files from their sources, as `node --import tsx --test` does.
 */
import { spawn } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const REPO = dirname(dirname(fileURLToPath(import.meta.url)));
const CACHE = join(REPO, 'node_modules', '.cache', 'paratrain-tests');
/** this run's bundles, apart from another run's in the same checkout; removed when the tests end */
const OUT = join(CACHE, String(process.pid));
const RUNNER_OPTIONS = ['--test-concurrency=2', '--test-timeout=300000'];

const args = process.argv.slice(2);
const dash = args.indexOf('--');
const named = dash < 0 ? args : args.slice(0, dash);
const extra = dash < 0 ? [] : args.slice(dash + 1);
const files = (named.length > 0 ? named.map((f) => resolve(f)) : defaultFiles()).sort();

const sources = process.env.PARATRAIN_TEST_BUNDLE === '0';
const loader = sources ? ['--import', 'tsx'] : ['--enable-source-maps'];
const runnable = sources ? files : await bundle(files);
const child = spawn(process.execPath, [...loader, '--test', ...RUNNER_OPTIONS, ...extra, ...runnable], {
  cwd: REPO,
  stdio: 'inherit',
});
child.on('exit', (code, signal) => {
  if (!sources) rmSync(OUT, { recursive: true, force: true });
  process.exit(code ?? (signal ? 1 : 0));
});
for (const s of ['SIGINT', 'SIGTERM']) process.on(s, () => child.kill(s));

/** test/<area>/*.test.ts, as the README's test command names them. */
function defaultFiles() {
  const test = join(REPO, 'test');
  return readdirSync(test, { withFileTypes: true })
    .filter((d) => d.isDirectory())
    .flatMap((d) =>
      readdirSync(join(test, d.name))
        .filter((f) => f.endsWith('.test.ts'))
        .map((f) => join(test, d.name, f)),
    );
}

/** Bundles `entries` into OUT and returns the bundled test files, in the same order. */
async function bundle(entries) {
  // a killed run's bundles, a day old
  for (const old of existsSync(CACHE) ? readdirSync(CACHE) : []) {
    const at = join(CACHE, old);
    if (Date.now() - statSync(at).mtimeMs > 86_400_000) rmSync(at, { recursive: true, force: true });
  }
  const esbuild = createRequire(createRequire(import.meta.url).resolve('tsx/package.json'))('esbuild');
  // each module declares its own URL and folder, on its first line (the source map's lines stay),
  // and `define` points import.meta's at them: a syntax-aware swap (a string that names them is
  // left alone), each module's declarations renamed apart by the bundler
  const ownMeta = {
    name: 'own-import-meta',
    setup(b) {
      b.onLoad({ filter: /\.ts$/ }, (a) => ({
        contents:
          `var __ownUrl = ${JSON.stringify(pathToFileURL(a.path).href)}, __ownDir = ${JSON.stringify(dirname(a.path))}; ` +
          readFileSync(a.path, 'utf8'),
        loader: 'ts',
      }));
    },
  };
  await esbuild.build({
    entryPoints: entries,
    outbase: REPO,
    outdir: OUT,
    bundle: true,
    splitting: true,
    format: 'esm',
    platform: 'node',
    target: 'node20',
    packages: 'external',
    sourcemap: 'linked',
    define: { 'import.meta.url': '__ownUrl', 'import.meta.dirname': '__ownDir' },
    plugins: [ownMeta],
    logLevel: 'error',
  });
  return entries.map((f) => join(OUT, relative(REPO, f)).replace(/\.ts$/, '.js'));
}
