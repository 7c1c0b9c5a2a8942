// Shared by the optional addons' build scripts (native/build.mjs, native/mpi/build.mjs): finding
// npm's bundled node-gyp and Node's headers without downloading anything.
import { existsSync, realpathSync } from 'node:fs';
import { dirname, join } from 'node:path';

/** node-gyp's bin script: the copy bundled with npm (npm exports its path to scripts), else a local one. */
export function findNodeGyp(root) {
  const npmDir = (() => {
    try { return dirname(dirname(realpathSync(join(dirname(process.execPath), 'npm')))); } catch { return null; }
  })();
  const candidates = [
    process.env.npm_config_node_gyp,
    join(dirname(process.execPath), '..', 'lib', 'node_modules', 'npm', 'node_modules', 'node-gyp', 'bin', 'node-gyp.js'),
    npmDir && join(npmDir, 'node_modules', 'node-gyp', 'bin', 'node-gyp.js'),
    join(root, 'node_modules', 'node-gyp', 'bin', 'node-gyp.js'),
  ];
  return candidates.find((c) => c && existsSync(c));
}

/** --nodedir for node-gyp: npm's `nodedir` when set, else this Node's prefix when it ships include/node. */
export function nodedirArgs() {
  if (process.env.npm_config_nodedir) return [];
  const prefix = join(dirname(process.execPath), '..');
  return existsSync(join(prefix, 'include', 'node', 'node_api.h')) ? [`--nodedir=${prefix}`] : [];
}
