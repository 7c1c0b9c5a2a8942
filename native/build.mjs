// Builds the optional `native` kernel backend: native/paratrain_native.c → build/native/paratrain_native.node,
// an N-API addon over OpenBLAS. `npm run build:native` runs it; `npm ci` runs it through `postprepare`
// with --optional.
//
// - OpenBLAS missing (no cblas.h or no libopenblas): prints one line and exits 0. Install Debian's
//   libopenblas-dev (or point PARATRAIN_OPENBLAS_INCLUDE / PARATRAIN_OPENBLAS_LIBDIR at another
//   OpenBLAS: then only those directories are searched) to enable it.
// - PARATRAIN_NATIVE=0: skips the build (one line, exit 0).
// - --optional: any failure (compiler, node-gyp, headers, a library that does not load) is reported
//   in one line and the script still exits 0; without it a failed build exits 1 with its log.
// - --verbose: shows node-gyp's output as it runs.
//
// node-gyp is the copy bundled with npm (npm exports its path as npm_config_node_gyp to scripts);
// Node's headers come from npm's `nodedir` when set, else from this Node's own prefix when it ships
// include/node (Debian's nodejs does), so no headers are downloaded.
import { existsSync, realpathSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { addonScript } from './gyp.mjs';

const { artifact, finish, build, probe } = addonScript(import.meta.url, {
  name: 'paratrain_native',
  script: 'build:native',
  continuing: 'continuing without the optional native backend (wasm stays the default)',
});

const TRIPLETS = {
  x64: 'x86_64-linux-gnu',
  arm64: 'aarch64-linux-gnu',
  arm: 'arm-linux-gnueabihf',
  ppc64: 'powerpc64le-linux-gnu',
  s390x: 's390x-linux-gnu',
  riscv64: 'riscv64-linux-gnu',
  ia32: 'i386-linux-gnu',
};

function searchDirs(envName, defaults) {
  const given = process.env[envName];
  return given ? given.split(':').filter(Boolean) : defaults;
}

function findOpenBlas() {
  const triplet = TRIPLETS[process.arch];
  const includes = searchDirs('PARATRAIN_OPENBLAS_INCLUDE', [
    ...(triplet ? [`/usr/include/${triplet}`] : []),
    '/usr/include/openblas',
    '/usr/include',
    '/usr/local/include',
    '/usr/local/include/openblas',
    '/opt/homebrew/opt/openblas/include',
    '/usr/local/opt/openblas/include',
  ]);
  const libdirs = searchDirs('PARATRAIN_OPENBLAS_LIBDIR', [
    ...(triplet ? [`/usr/lib/${triplet}`] : []),
    '/usr/lib64',
    '/usr/lib',
    '/usr/local/lib',
    '/usr/local/lib64',
    '/opt/homebrew/opt/openblas/lib',
    '/usr/local/opt/openblas/lib',
  ]);
  const include = includes.find((d) => existsSync(join(d, 'cblas.h')));
  const lib = libdirs
    .flatMap((d) => ['libopenblas.so', 'libopenblas.dylib'].map((f) => join(d, f)))
    .find((f) => existsSync(f));
  return { include, lib, libdir: lib && dirname(lib) };
}

try {
  if (process.env.PARATRAIN_NATIVE === '0')
    finish(true, 'skipped (PARATRAIN_NATIVE=0); the native backend stays unavailable');
  const blas = findOpenBlas();
  if (!blas.include || !blas.lib) {
    const missing = [!blas.include && 'cblas.h', !blas.lib && 'libopenblas'].filter(Boolean).join(' and ');
    finish(
      true,
      `OpenBLAS not found (no ${missing}); skipping the optional native backend (apt-get install libopenblas-dev to enable it)`,
    );
  }
  build([`--openblas-include=${blas.include}`, `--openblas-libdir=${blas.libdir}`]);

  const about = probe(
    `const m = require(${JSON.stringify(artifact)}); const i = m.info(); console.log(i.parallel + ' build, core ' + i.corename + ', ' + i.threads + ' thread(s) in use')`,
    { ...process.env, OPENBLAS_NUM_THREADS: '1' },
  );
  finish(true, `built build/native/paratrain_native.node against ${realpathSync(blas.lib)} (${about})`);
} catch (err) {
  finish(false, `unexpected error: ${err?.message ?? err}`);
}
