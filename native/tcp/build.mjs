// Builds the tcp transport's optional native data path: native/tcp/paratrain_tcp.c →
// build/native/paratrain_tcp.node, an N-API addon with no library dependency (a C compiler and
// Node's headers). `npm run build:tcp` runs it; `npm ci` runs it through `postprepare` with --optional.
// Without it the transport uses its WebAssembly kernel (same results, more copies).
//
// - PARATRAIN_TCP_NATIVE=0: skips the build (one line, exit 0).
// - --optional: any failure (compiler, node-gyp, headers) is reported in one line and the script
//   still exits 0; without it a failed build exits 1 with its log.
// - --verbose: shows node-gyp's output as it runs.
import { spawnSync } from 'node:child_process';
import { rmSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { finisher, gypBuild } from '../gyp.mjs';

const here = dirname(fileURLToPath(import.meta.url));
const root = dirname(dirname(here));
const artifact = join(root, 'build', 'native', 'paratrain_tcp.node');
const args = process.argv.slice(2);
const optional = args.includes('--optional');
const verbose = args.includes('--verbose');
const tag = 'build:tcp:';

const finish = finisher(tag, optional, 'continuing without it (the tcp transport uses its wasm kernel)');

try {
  if (process.env.PARATRAIN_TCP_NATIVE === '0') finish(true, 'skipped (PARATRAIN_TCP_NATIVE=0); the tcp transport uses its wasm kernel');
  gypBuild({ root, dir: here, name: 'paratrain_tcp', artifact, verbose, finish, script: 'build:tcp' });
  // load it once in a fresh process, so an addon that builds but does not load is caught here
  const probe = spawnSync(process.execPath, ['-e', `const m = require(${JSON.stringify(artifact)});
    if (typeof m.addHash !== 'function' || typeof m.hash !== 'function') throw new Error('exports are missing');`], { encoding: 'utf8' });
  if (probe.status !== 0) {
    rmSync(artifact, { force: true });
    finish(false, `the addon was built but does not load: ${(probe.stderr || '').trim().split('\n')[0]}`, probe.stderr);
  }
  finish(true, 'built build/native/paratrain_tcp.node');
} catch (err) {
  finish(false, `unexpected error: ${err?.message ?? err}`);
}
