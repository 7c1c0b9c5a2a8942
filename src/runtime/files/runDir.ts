/**
 * Run directories: where a run's metrics.jsonl, checkpoints and resolved config go.
 *
 * Without `out`, each run gets `runs/<YYYYMMDD-HHMMSS>-<4 hex>` and `runs/latest` points at the newest
 * (a symlink, replaced atomically; `runs/latest.txt` holding the name where symlinks are not allowed).
 * With `out`, a directory that already holds files is refused unless `force` is given. Nothing is
 * ever deleted here.
 */
import {
  mkdirSync,
  readdirSync,
  renameSync,
  statSync,
  symlinkSync,
  unlinkSync,
  writeFileSync,
  lstatSync,
  type Stats,
} from 'node:fs';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { makeWritableDir, runDirError } from './writableDir.ts';

export interface RunDirOptions {
  /** an explicit run directory (created if missing) */
  out?: string;
  /** where timestamped run directories go when `out` is not given; default 'runs' */
  root?: string;
  /** allow `out` to be a directory that already holds files (they are kept; files of the same name are overwritten) */
  force?: boolean;
}

const pad = (n: number, w = 2) => String(n).padStart(w, '0');

/** `20250101-093000` in local time. */
export function timestampName(d = new Date()): string {
  return `${d.getFullYear()}${pad(d.getMonth() + 1)}${pad(d.getDate())}-${pad(d.getHours())}${pad(d.getMinutes())}${pad(d.getSeconds())}`;
}

/** Lists a directory's entries, or null when it does not exist. Throws if `dir` is not a directory. */
function listDir(dir: string): string[] | null {
  let st: Stats;
  try {
    st = statSync(dir);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw runDirError(dir, e);
  }
  if (!st.isDirectory()) throw new Error(`run directory ${dir} exists and is not a directory; choose another --out`);
  try {
    return readdirSync(dir).sort();
  } catch (e) {
    throw runDirError(dir, e);
  }
}

function describeFiles(names: string[], max = 5): string {
  const shown = names.slice(0, max).join(', ');
  return names.length > max ? `${shown}, … ${names.length} entries in all` : shown;
}

/** Creates (or, with `force`, reuses) the run directory and returns its path. */
export function createRunDir(opts: RunDirOptions = {}): string {
  const { out, root = 'runs', force = false } = opts;
  if (out !== undefined) {
    const existing = listDir(out);
    if (existing !== null && existing.length > 0 && !force) {
      throw new Error(
        `run directory ${out} already holds files (${describeFiles(existing)}); choose another --out or pass --force to overwrite`,
      );
    }
    makeWritableDir(out);
    return out;
  }

  makeWritableDir(root);
  const stamp = timestampName();
  for (let attempt = 0; ; attempt++) {
    const name = `${stamp}-${randomBytes(2).toString('hex')}`;
    const dir = join(root, name);
    try {
      mkdirSync(dir); // not recursive: fails if another run took the same name
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'EEXIST' && attempt < 20) continue;
      throw runDirError(dir, e);
    }
    pointLatestAt(root, name);
    return dir;
  }
}

/**
 * Makes `<root>/latest` point at `<root>/<name>`: a relative symlink swapped in by rename (atomic),
 * or `<root>/latest.txt` holding the name when a symlink cannot be made or `latest` is not a symlink.
 */
export function pointLatestAt(root: string, name: string): void {
  const latest = join(root, 'latest');
  const tmp = join(root, `.latest.tmp-${process.pid}-${randomBytes(3).toString('hex')}`);
  let replaceable = true;
  try {
    replaceable = lstatSync(latest).isSymbolicLink();
  } catch {
    /* missing: fine */
  }
  if (replaceable) {
    try {
      symlinkSync(name, tmp, 'dir');
      try {
        renameSync(tmp, latest);
        return;
      } catch {
        try {
          unlinkSync(tmp);
        } catch {
          /* gone */
        }
      }
    } catch {
      /* symlinks not allowed here: fall back to latest.txt */
    }
  }
  try {
    writeFileSync(tmp, `${name}\n`);
    renameSync(tmp, join(root, 'latest.txt'));
  } catch {
    try {
      unlinkSync(tmp);
    } catch {
      /* gone */
    }
    // pointing at the newest run is a convenience; the run itself goes on
  }
}
