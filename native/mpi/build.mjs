// Builds the optional Open MPI transport: native/mpi/paratrain_mpi.c → build/native/paratrain_mpi.node,
// an N-API addon over MPI. `npm run build:mpi` runs it; `npm ci` runs it through `postprepare` with
// --optional.
//
// - Open MPI missing (no `mpicc` on PATH, or no mpi.h where it says): prints one line and exits 0.
//   Install Debian's libopenmpi-dev (and openmpi-bin for mpirun) to enable it; PARATRAIN_MPICC
//   names another MPI compiler wrapper (Open MPI's: it must understand --showme:incdirs/libdirs/libs).
// - PARATRAIN_MPI=0: skips the build (one line, exit 0).
// - --optional: any failure (compiler, node-gyp, headers, a library that does not load) is reported
//   in one line and the script still exits 0; without it a failed build exits 1 with its log.
// - --verbose: shows node-gyp's output as it runs.
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { addonScript } from '../gyp.mjs';

const { artifact, finish, build, probe } = addonScript(import.meta.url, {
  name: 'paratrain_mpi',
  script: 'build:mpi',
  continuing: 'continuing without the optional MPI transport',
});

/** `mpicc --showme:<what>` split into words, or null when mpicc is absent or does not answer. */
function showme(mpicc, what) {
  const r = spawnSync(mpicc, [`--showme:${what}`], { encoding: 'utf8' });
  if (r.error || r.status !== 0) return null;
  return r.stdout.trim().split(/\s+/).filter(Boolean);
}

try {
  if (process.env.PARATRAIN_MPI === '0') finish(true, 'skipped (PARATRAIN_MPI=0); the MPI transport stays unavailable');
  const mpicc = process.env.PARATRAIN_MPICC || 'mpicc';
  const incdirs = showme(mpicc, 'incdirs');
  if (!incdirs)
    finish(
      true,
      `Open MPI not found (no working \`${mpicc} --showme\`); skipping the optional MPI transport (apt-get install libopenmpi-dev openmpi-bin to enable it)`,
    );
  if (!incdirs.some((d) => existsSync(join(d, 'mpi.h')))) {
    finish(
      true,
      `${mpicc} names no directory with mpi.h (${incdirs.join(' ') || 'none'}); skipping the optional MPI transport (apt-get install libopenmpi-dev)`,
    );
  }
  const libdirs = showme(mpicc, 'libdirs') ?? [];
  const libs = showme(mpicc, 'libs') ?? ['mpi'];
  const ldflags = [...libdirs.flatMap((d) => [`-L${d}`, `-Wl,-rpath,${d}`]), ...libs.map((l) => `-l${l}`)];

  build([`--mpi-include=${incdirs.join(' ')}`, `--mpi-ldflags=${ldflags.join(' ')}`]);

  // loaded the way src/comm/mpi/addon.ts does (RTLD_GLOBAL); MPI itself is not initialised
  probe(`
    const os = require('node:os'); const m = { exports: {} };
    process.dlopen(m, ${JSON.stringify(artifact)}, os.constants.dlopen.RTLD_NOW | os.constants.dlopen.RTLD_GLOBAL);
    if (typeof m.exports.iallreduce !== 'function') throw new Error('iallreduce is missing');
    console.log(m.exports.state());`);
  const version = spawnSync(join(dirname(mpicc === 'mpicc' ? '' : mpicc), 'ompi_info'), ['--version'], {
    encoding: 'utf8',
  });
  const name = version.status === 0 ? version.stdout.split('\n')[0].trim() : 'MPI';
  finish(
    true,
    `built build/native/paratrain_mpi.node against ${name} (${libdirs.join(' ') || 'default library path'})`,
  );
} catch (err) {
  finish(false, `unexpected error: ${err?.message ?? err}`);
}
