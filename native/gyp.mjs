// Shared by the optional addons' build scripts (native/build.mjs, native/*/build.mjs): finding
// npm's bundled node-gyp and Node's headers without downloading anything, building, and loading
// the result once.
import { spawnSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, realpathSync, rmSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** node-gyp's bin script: the copy bundled with npm (npm exports its path to scripts), else a local one. */
export function findNodeGyp(root) {
  const npmDir = (() => {
    try {
      return dirname(dirname(realpathSync(join(dirname(process.execPath), 'npm'))));
    } catch {
      return null;
    }
  })();
  const candidates = [
    process.env.npm_config_node_gyp,
    join(
      dirname(process.execPath),
      '..',
      'lib',
      'node_modules',
      'npm',
      'node_modules',
      'node-gyp',
      'bin',
      'node-gyp.js',
    ),
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

/**
 * The way a build script ends: `ok` exits 0; a failure exits 0 under --optional (the addon is
 * optional: `continuing` says what the install does without it), else 1 with the build log.
 */
export function finisher(tag, optional, continuing) {
  return function finish(ok, line, log = '') {
    if (ok) {
      console.log(`${tag} ${line}`);
      process.exit(0);
    }
    if (!optional && log) process.stderr.write(log.endsWith('\n') ? log : `${log}\n`);
    const out = optional ? console.log : console.error;
    out(`${tag} ${line}${optional ? ` — ${continuing}` : ''}`);
    process.exit(optional ? 0 : 1);
  };
}

/**
 * `node-gyp rebuild` in `dir` (with `extra` gyp arguments), then copies build/Release/`name`.node
 * to `artifact`. A failure ends the script through `finish` with the log's last 40 lines.
 */
export function gypBuild({ root, dir, name, artifact, extra = [], verbose, finish, script }) {
  const gyp = findNodeGyp(root);
  if (!gyp) finish(false, `node-gyp not found (it ships with npm; run this through \`npm run ${script}\`)`);
  const run = spawnSync(process.execPath, [gyp, 'rebuild', `--directory=${dir}`, ...nodedirArgs(), ...extra], {
    cwd: dir,
    stdio: verbose ? 'inherit' : 'pipe',
    encoding: 'utf8',
  });
  if (run.error || run.status !== 0) {
    const log = `${run.stdout ?? ''}${run.stderr ?? ''}`.split('\n').slice(-40).join('\n');
    finish(false, `compiling the addon failed (${run.error?.message ?? `node-gyp exited with ${run.status}`})`, log);
  }
  mkdirSync(dirname(artifact), { recursive: true });
  copyFileSync(join(dir, 'build', 'Release', `${name}.node`), artifact);
}

/**
 * The common start of an addon build script at `moduleUrl` building `name`.node (npm script
 * `script`): its folder, the repository root, the artifact build/native/`name`.node, the flags
 * (--optional, --verbose), `finish` (see finisher; `continuing` says what happens without the
 * addon), `build(extra)`, which runs gypBuild with extra gyp arguments, and `probe(code, env)`.
 *
 * probe runs `code` (node -e) in a fresh process, which loads the artifact, so an addon that
 * builds but does not load (a library that links but is missing at run time, a missing export) is
 * caught at install: then the artifact is removed and the script ends through `finish`. It
 * returns what the code printed, trimmed.
 */
export function addonScript(moduleUrl, { name, script, continuing }) {
  const here = dirname(fileURLToPath(moduleUrl));
  const root = dirname(dirname(fileURLToPath(import.meta.url)));
  const artifact = join(root, 'build', 'native', `${name}.node`);
  const args = process.argv.slice(2);
  const verbose = args.includes('--verbose');
  const finish = finisher(`${script}:`, args.includes('--optional'), continuing);
  const build = (extra = []) => gypBuild({ root, dir: here, name, artifact, extra, verbose, finish, script });
  const probe = (code, env = process.env) => {
    const r = spawnSync(process.execPath, ['-e', code], { env, encoding: 'utf8' });
    if (r.status !== 0) {
      rmSync(artifact, { force: true });
      // the error's own line, not Node's "[eval]:2" location line before it
      const lines = (r.stderr || '').trim().split('\n');
      finish(
        false,
        `the addon was built but does not load: ${lines.find((l) => /^\w*Error\b/.test(l)) ?? lines[0]}`,
        r.stderr,
      );
    }
    return r.stdout.trim();
  };
  return { here, root, artifact, finish, build, probe };
}
