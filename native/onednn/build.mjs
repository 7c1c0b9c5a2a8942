// Builds the optional `onednn` kernel backend: native/onednn/*.c → build/native/paratrain_onednn.node,
// an N-API addon over oneDNN's C API (2.x). `npm run build:onednn` runs it; `npm ci` runs it through
// `postprepare` with --optional.
//
// - oneDNN missing (no oneapi/dnnl/dnnl.h or no libdnnl): prints one line and exits 0. Install
//   Debian's libdnnl-dev (or point PARATRAIN_ONEDNN_INCLUDE / PARATRAIN_ONEDNN_LIBDIR at another
//   oneDNN: then only those directories are searched) to enable it.
// - oneDNN 3.x (another C API) or a TBB/threadpool build (threads paratrain cannot pin to one per
//   device): one line saying so, exit 0.
// - PARATRAIN_ONEDNN=0: skips the build (one line, exit 0).
// - --optional: any failure (compiler, node-gyp, headers, a library that does not load) is reported
//   in one line and the script still exits 0; without it a failed build exits 1 with its log.
// - --verbose: shows node-gyp's output as it runs.
//
// Compiled with plain -O2 and no -march (see binding.gyp): oneDNN dispatches its own kernels for
// the CPU it finds at run time, so the addon stays portable.
import { existsSync, readFileSync, realpathSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { addonScript } from '../gyp.mjs';

const { artifact, finish, build, probe } = addonScript(import.meta.url, {
  name: 'paratrain_onednn',
  script: 'build:onednn',
  continuing: 'continuing without the optional onednn backend',
});

const TRIPLETS = {
  x64: 'x86_64-linux-gnu',
  arm64: 'aarch64-linux-gnu',
  ppc64: 'powerpc64le-linux-gnu',
  s390x: 's390x-linux-gnu',
};

function searchDirs(envName, defaults) {
  const given = process.env[envName];
  return given ? given.split(':').filter(Boolean) : defaults;
}

function findOneDnn() {
  const triplet = TRIPLETS[process.arch];
  const includes = searchDirs('PARATRAIN_ONEDNN_INCLUDE', [
    '/usr/include',
    '/usr/local/include',
    '/opt/intel/oneapi/dnnl/latest/include',
    '/opt/homebrew/include',
  ]);
  const libdirs = searchDirs('PARATRAIN_ONEDNN_LIBDIR', [
    ...(triplet ? [`/usr/lib/${triplet}`] : []),
    '/usr/lib64',
    '/usr/lib',
    '/usr/local/lib',
    '/usr/local/lib64',
    '/opt/intel/oneapi/dnnl/latest/lib',
    '/opt/homebrew/lib',
  ]);
  const include = includes.find((d) => existsSync(join(d, 'oneapi', 'dnnl', 'dnnl.h')));
  const lib = libdirs.flatMap((d) => ['libdnnl.so', 'libdnnl.dylib'].map((f) => join(d, f))).find((f) => existsSync(f));
  return { include, lib, libdir: lib && dirname(lib) };
}

/** The value of `#define NAME value` in a header, or undefined. */
function define(file, name) {
  const m = readFileSync(file, 'utf8').match(new RegExp(`^#define\\s+${name}\\s+(\\S+)`, 'm'));
  return m?.[1];
}

try {
  if (process.env.PARATRAIN_ONEDNN === '0')
    finish(true, 'skipped (PARATRAIN_ONEDNN=0); the onednn backend stays unavailable');
  const dnnl = findOneDnn();
  if (!dnnl.include || !dnnl.lib) {
    const missing = [!dnnl.include && 'oneapi/dnnl/dnnl.h', !dnnl.lib && 'libdnnl'].filter(Boolean).join(' and ');
    finish(
      true,
      `oneDNN not found (no ${missing}); skipping the optional onednn backend (apt-get install libdnnl-dev to enable it)`,
    );
  }
  const headers = join(dnnl.include, 'oneapi', 'dnnl');
  const major = Number(define(join(headers, 'dnnl_version.h'), 'DNNL_VERSION_MAJOR'));
  const version = ['MAJOR', 'MINOR', 'PATCH']
    .map((p) => define(join(headers, 'dnnl_version.h'), `DNNL_VERSION_${p}`))
    .join('.');
  if (major !== 2)
    finish(
      true,
      `oneDNN ${version} found, but the addon speaks oneDNN 2.x's C API; skipping the optional onednn backend`,
    );
  const runtime = define(join(headers, 'dnnl_config.h'), 'DNNL_CPU_RUNTIME');
  // OpenMP: the addon calls omp_set_num_threads(1) on each calling thread, so it links libgomp.
  const extraLibs = runtime === 'DNNL_RUNTIME_OMP' ? ['-lgomp'] : runtime === 'DNNL_RUNTIME_SEQ' ? [] : null;
  if (!extraLibs)
    finish(
      true,
      `oneDNN ${version} uses the ${runtime} CPU runtime; the addon runs oneDNN on one thread per device only with the OpenMP or sequential runtime; skipping the optional onednn backend`,
    );

  build([
    `--onednn-include=${dnnl.include}`,
    `--onednn-libdir=${dnnl.libdir}`,
    `--onednn-extra-libs=${extraLibs.join(' ')}`,
  ]);

  const about = probe(
    `const i = require(${JSON.stringify(artifact)}).info(); console.log('oneDNN ' + i.version + ', ISA ' + i.isa + ', ' + i.runtime + ' runtime, ' + i.threads + ' thread per device')`,
  );
  finish(true, `built build/native/paratrain_onednn.node against ${realpathSync(dnnl.lib)} (${about})`);
} catch (err) {
  finish(false, `unexpected error: ${err?.message ?? err}`);
}
