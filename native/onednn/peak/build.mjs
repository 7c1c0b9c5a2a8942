// Builds the FMA peak probe: native/onednn/peak/fma_peak.c → build/native/paratrain_peak.node, a tiny
// N-API addon that needs only a C compiler; `npm run bench -- kernels` and `-- train` print every
// figure as a fraction of the peak it measures (bench/peak.ts). `npm run build:peak` runs it; `npm ci`
// runs it through `postprepare` with --optional (a failure is one line; the benchmarks then say the
// peak was not measured). PARATRAIN_PEAK=0 skips it.
import { addonScript } from '../../gyp.mjs';

const { artifact, finish, build, probe } = addonScript(import.meta.url, {
  name: 'paratrain_peak',
  script: 'build:peak',
  continuing: 'benchmarks will not print the FMA peak',
});

try {
  if (process.env.PARATRAIN_PEAK === '0') finish(true, 'skipped (PARATRAIN_PEAK=0)');
  build();
  probe(
    `const m = require(${JSON.stringify(artifact)}); if (typeof m.fmaPeak !== 'function') throw new Error('fmaPeak is missing')`,
  );
  finish(true, 'built build/native/paratrain_peak.node');
} catch (err) {
  finish(false, `unexpected error: ${err?.message ?? err}`);
}
