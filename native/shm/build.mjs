// Builds the shm transport's optional native reduction: native/shm/paratrain_shm.c →
// build/native/paratrain_shm.node, an N-API addon with no library dependency (a C compiler and
// Node's headers). `npm run build:shm` runs it; `npm ci` runs it through `postprepare` with --optional.
// Without it the transport reduces with its WebAssembly kernel (same bits, slower; see nativeReduce.ts).
//
// - PARATRAIN_SHM_NATIVE=0: skips the build (one line, exit 0).
// - --optional: any failure (compiler, node-gyp, headers) is reported in one line and the script
//   still exits 0; without it a failed build exits 1 with its log.
// - --verbose: shows node-gyp's output as it runs.
import { addonScript } from '../gyp.mjs';

const { artifact, finish, build, probe } = addonScript(import.meta.url, {
  name: 'paratrain_shm',
  script: 'build:shm',
  continuing: 'continuing without it (the shm transport uses its wasm kernel)',
});

try {
  if (process.env.PARATRAIN_SHM_NATIVE === '0')
    finish(true, 'skipped (PARATRAIN_SHM_NATIVE=0); the shm transport uses its wasm kernel');
  build();
  const isa = probe(`const m = require(${JSON.stringify(artifact)});
    if (typeof m.reduce !== 'function' || typeof m.setIsa !== 'function') throw new Error('exports are missing');
    console.log(m.isa());`);
  finish(true, `built build/native/paratrain_shm.node (${isa})`);
} catch (err) {
  finish(false, `unexpected error: ${err?.message ?? err}`);
}
