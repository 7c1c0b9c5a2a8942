// Builds the FMA peak probe: native/onednn/peak/fma_peak.c → build/native/paratrain_peak.node, a tiny
// N-API addon that needs only a C compiler; `npm run bench -- kernels` and `-- train` print every
// figure as a fraction of the peak it measures (bench/peak.ts). `npm run build:peak` runs it; `npm ci`
// runs it through `postprepare` with --optional (a failure is one line; the benchmarks then say the
// peak was not measured). PARATRAIN_PEAK=0 skips it.
import { spawnSync } from 'node:child_process';
import { rmSync } from 'node:fs';
import { addonScript } from '../../gyp.mjs';

const { artifact, finish, build } = addonScript(import.meta.url, { name: 'paratrain_peak', script: 'build:peak', continuing: 'benchmarks will not print the FMA peak' });

try {
  if (process.env.PARATRAIN_PEAK === '0') finish(true, 'skipped (PARATRAIN_PEAK=0)');
  build();
  const probe = spawnSync(process.execPath, ['-e', `const m = require(${JSON.stringify(artifact)}); if (typeof m.fmaPeak !== 'function') throw new Error('fmaPeak is missing')`], { encoding: 'utf8' });
  if (probe.status !== 0) {
    rmSync(artifact, { force: true });
    finish(false, `the addon was built but does not load: ${(probe.stderr || '').trim().split('\n')[0]}`, probe.stderr);
  }
  finish(true, 'built build/native/paratrain_peak.node');
} catch (err) {
  finish(false, `unexpected error: ${err?.message ?? err}`);
}
