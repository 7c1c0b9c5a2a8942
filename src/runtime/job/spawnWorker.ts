import { Worker } from 'node:worker_threads';
import { execFileSync } from 'node:child_process';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { readFileSync, utimesSync } from 'node:fs';
import { createRequire } from 'node:module';
import { createHash } from 'node:crypto';
import { dirname, join } from 'node:path';

/**
 * Starts a worker thread on a module next to the caller, given by its URL without extension. From
 * compiled JavaScript that is plain; from TypeScript sources (tests, tsx) tsx's --import hooks do
 * not reach worker threads on Node 20 (tsx#354), and registering tsx in each worker costs about a
 * CPU-second of module loading, so the entry's module graph is bundled once per process (esbuild,
 * which tsx ships) and every worker loads the one file. Should bundling fail, or with
 * PARATRAIN_WORKER_BUNDLE=0, the worker registers tsx itself.
 */
export function spawnModuleWorker(callerUrl: string, relativeStem: string, workerData: unknown): Worker {
  const isTs = callerUrl.endsWith('.ts');
  const entry = new URL(`${relativeStem}.${isTs ? 'ts' : 'js'}`, callerUrl);
  if (!isTs) return new Worker(entry, { workerData });
  const bundle = bundledModule(entry.href);
  const load = bundle
    ? `process.setSourceMapsEnabled(true); import(${JSON.stringify(bundle)})`
    : `import('tsx/esm/api').then((m) => { m.register(); return import(${JSON.stringify(entry.href)}); })`;
  return new Worker(load, { eval: true, workerData });
}

const bundles = new Map<string, string | null>();

const sha256 = (data: string | Buffer) => createHash('sha256').update(data).digest('hex');

/** Where the bundler records an entry's last bundle, the hash of each source file in it and its own. */
function indexFile(entry: string): string {
  const tsx = createRequire(entry).resolve('tsx/package.json');
  return join(dirname(dirname(tsx)), '.cache', 'paratrain-workers', `index-${sha256(entry).slice(0, 16)}.json`);
}

/**
 * The entry's last bundle when every source in it is unchanged (hashing them takes milliseconds,
 * bundling most of a second: each CLI process and test process needs one), else null.
 */
export function indexedBundle(entry: string): string | null {
  try {
    const index = indexFile(entry);
    const { bundler, out, inputs } = JSON.parse(readFileSync(index, 'utf8')) as {
      bundler: string;
      out: string;
      inputs: [string, string][];
    };
    if (bundler !== sha256(BUNDLER)) return null;
    for (const [path, hash] of inputs) if (sha256(readFileSync(path)) !== hash) return null;
    // in use: touched, so that no bundler prunes them; already pruned, it throws and is made again
    const now = new Date();
    utimesSync(dirname(out), now, now);
    utimesSync(index, now, now);
    return pathToFileURL(out).href;
  } catch {
    return null;
  }
}

/**
 * The URL of one file holding a TypeScript module with the sources it imports (packages stay
 * imports), made on first use in this process unless the last one made, by any process, holds the
 * sources as they are (indexedBundle); null where it cannot be made or with PARATRAIN_WORKER_BUNDLE=0.
 * Test harnesses start their own threads and processes on it too.
 */
export function bundledModule(entryHref: string): string | null {
  if (process.env.PARATRAIN_WORKER_BUNDLE === '0') return null;
  const had = bundles.get(entryHref);
  if (had) {
    // in use: its folder's time keeps other processes from pruning it; pruned anyway, made again
    try {
      const now = new Date();
      utimesSync(dirname(fileURLToPath(had)), now, now);
      return had;
    } catch {}
  } else if (had === null) return null;
  let made = indexedBundle(fileURLToPath(entryHref));
  if (made) {
    bundles.set(entryHref, made);
    return made;
  }
  try {
    const args = ['--input-type=module', '-e', BUNDLER, fileURLToPath(entryHref), sha256(BUNDLER)];
    const out = execFileSync(process.execPath, args, {
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    made = pathToFileURL(out.trim()).href;
  } catch {
    made = null;
  }
  bundles.set(entryHref, made);
  return made;
}

// Runs in a child process (esbuild's build with plugins is asynchronous, the spawn is not): bundles
// the entry with its sources (packages stay imports), each file's import.meta.url kept as its own,
// into node_modules/.cache (so the packages resolve), under the hash of the output: processes that
// bundle the same sources share one folder, written whole before it appears; folders unused for an
// hour go. Records the bundle and its sources' hashes in the entry's index file (indexFile, written
// whole too). Prints the entry's file.
const BUNDLER = `
import { createRequire } from 'node:module';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, statSync, utimesSync, writeFileSync } from 'node:fs';
import { basename, dirname, join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
const entry = process.argv[1];
const tsx = createRequire(entry).resolve('tsx/package.json');
const esbuild = createRequire(tsx)('esbuild');
const sha256 = (data) => createHash('sha256').update(data).digest('hex');
const bundled = new Map();
// each module declares its own URL on its first line (the source map's lines stay) and \`define\`
// points import.meta.url at it: a syntax-aware swap, each module's declaration renamed apart by
// the bundler (scripts/run-tests.mjs bundles the tests the same way)
const ownUrl = {
  name: 'own-import-meta-url',
  setup(b) {
    b.onLoad({ filter: /\\.ts$/ }, (a) => {
      const source = readFileSync(a.path);
      bundled.set(a.path, sha256(source));
      return {
        contents: 'var __ownUrl = ' + JSON.stringify(pathToFileURL(a.path).href) + '; ' + source.toString('utf8'),
        loader: 'ts',
      };
    });
  },
};
const root = join(dirname(dirname(tsx)), '.cache', 'paratrain-workers');
const r = await esbuild.build({
  entryPoints: [entry], bundle: true, format: 'esm', platform: 'node', target: 'node20', splitting: true,
  packages: 'external', sourcemap: 'inline', outdir: root, absWorkingDir: dirname(root), write: false,
  define: { 'import.meta.url': '__ownUrl' }, plugins: [ownUrl], logLevel: 'silent', metafile: true,
});
const hash = createHash('sha256');
for (const f of r.outputFiles) hash.update(f.path).update(f.contents);
const dir = join(root, hash.digest('hex').slice(0, 24));
if (existsSync(dir)) utimesSync(dir, new Date(), new Date());
else {
  const tmp = dir + '.' + process.pid;
  for (const f of r.outputFiles) {
    mkdirSync(dirname(join(tmp, f.path.slice(root.length))), { recursive: true });
    writeFileSync(join(tmp, f.path.slice(root.length)), f.contents);
  }
  try { renameSync(tmp, dir); } catch { rmSync(tmp, { recursive: true, force: true }); }
  // older sources' bundles, unused for an hour (a process starting workers from one touches it);
  // another process pruning at the same time is no error
  for (const old of readdirSync(root)) {
    const at = join(root, old);
    try {
      if (at !== dir && Date.now() - statSync(at).mtimeMs > 3_600_000) rmSync(at, { recursive: true, force: true });
    } catch {}
  }
}
const out = join(dir, basename(entry).replace(/\\.ts$/, '.js'));
const inputs = Object.keys(r.metafile.inputs).map((p) => resolve(dirname(root), p));
const index = join(root, 'index-' + sha256(entry).slice(0, 16) + '.json');
writeFileSync(index + '.' + process.pid, JSON.stringify({
  bundler: process.argv[2], out, inputs: inputs.map((p) => [p, bundled.get(p) ?? sha256(readFileSync(p))]),
}));
renameSync(index + '.' + process.pid, index);
process.stdout.write(out);
`;
