// Builds the tcp transport's optional native data path: native/tcp/paratrain_tcp.c →
// build/native/paratrain_tcp.node, an N-API addon with no library dependency (a C compiler and
// Node's headers). `npm run build:tcp` runs it; `npm ci` runs it through `postprepare` with --optional.
// Without it the transport uses its WebAssembly kernel (same results, more copies).
//
// - PARATRAIN_TCP_NATIVE=0: skips the build (one line, exit 0).
// - --optional: any failure (compiler, node-gyp, headers) is reported in one line and the script
//   still exits 0; without it a failed build exits 1 with its log.
// - --verbose: shows node-gyp's output as it runs.
import { addonScript } from '../gyp.mjs';

const { artifact, finish, build, probe } = addonScript(import.meta.url, {
  name: 'paratrain_tcp',
  script: 'build:tcp',
  continuing: 'continuing without it (the tcp transport uses its wasm kernel)',
});

try {
  if (process.env.PARATRAIN_TCP_NATIVE === '0')
    finish(true, 'skipped (PARATRAIN_TCP_NATIVE=0); the tcp transport uses its wasm kernel');
  build();
  probe(`const m = require(${JSON.stringify(artifact)});
    if (typeof m.addHash !== 'function' || typeof m.hash !== 'function') throw new Error('exports are missing');`);
  finish(true, 'built build/native/paratrain_tcp.node');
} catch (err) {
  finish(false, `unexpected error: ${err?.message ?? err}`);
}
