/**
 * Run directories: where a run's metrics.jsonl, checkpoints and resolved config go.
 *
 * Without `out`, each run gets `runs/<YYYYMMDD-HHMMSS>-<4 hex>` and `runs/latest` points at the newest
 * (a symlink, replaced atomically; `runs/latest.txt` holding the name where symlinks are not allowed).
 * With `out`, a directory that already holds files is refused unless `force` is given. Given a
 * `lock`, the directory's lock (runLock.ts) is taken before it is looked into, so of two runs given
 * the same `out` at once one goes on and the other is refused, `force` or not. Nothing is ever
 * deleted here (unmakeRunDir.ts takes back a directory whose job never formed).
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
  readFileSync,
  readlinkSync,
  type Stats,
} from 'node:fs';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { makeWritableDir, runDirError } from './writableDir.ts';
import { LOCK_FILE, type RunLockHolder } from './runLock.ts';

export interface RunDirOptions {
  /** an explicit run directory (created if missing) */
  out?: string;
  /** where timestamped run directories go when `out` is not given; default 'runs' */
  root?: string;
  /** allow `out` to be a directory that already holds files (they are kept; files of the same name are overwritten) */
  force?: boolean;
  /** takes the directory's lock (process 0 of a run); without it the directory is not locked */
  lock?: RunLockHolder;
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

/** makeWritableDir's probe (writableDir.ts), which a run racing for the same directory may have there a moment */
const WRITE_PROBE = /^\.paratrain-write-test-\d+$/;

/** Refuses `out` when it holds files other than the lock (and a racing run's probe), unless `force`; returns their count. */
function refuseFiles(out: string, names: string[], force: boolean): number {
  const files = names.filter((n) => n !== LOCK_FILE && !WRITE_PROBE.test(n));
  if (files.length > 0 && !force) {
    throw new Error(
      `run directory ${out} already holds files (${describeFiles(files)}); choose another --out or pass --force to overwrite`,
    );
  }
  return files.length;
}

/** A run directory just opened, and what was there before this run (what unmakeRunDir.ts may take back). */
export interface MadeRunDir {
  dir: string;
  /** 'none': this run made the directory; 'empty': it held nothing (or only a lock); 'files': --force kept them */
  before: 'none' | 'empty' | 'files';
  /** a timestamped directory: its root and where `latest` pointed before (null: nowhere) */
  latest?: { root: string; name: string; before: string | null };
}

/** Creates (or, with `force`, reuses) the run directory and returns its path. */
export function createRunDir(opts: RunDirOptions = {}): string {
  return makeRunDir(opts).dir;
}

/** createRunDir, saying what was there before. */
export function makeRunDir(opts: RunDirOptions = {}): MadeRunDir {
  const { out, root = 'runs', force = false, lock } = opts;
  if (out !== undefined) {
    // files and no lock: refused before anything is made; with a lock, its holder is named first
    const before = listDir(out);
    if (before !== null && !(lock && before.includes(LOCK_FILE))) refuseFiles(out, before, force);
    makeWritableDir(out);
    if (lock) lock.take(out);
    // under the lock, a second look: what another run wrote between the first look and the lock
    const files = refuseFiles(out, lock ? (listDir(out) ?? []) : (before ?? []), force);
    return { dir: out, before: files > 0 ? 'files' : before === null ? 'none' : 'empty' };
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
    lock?.take(dir);
    const latestBefore = latestName(root);
    pointLatestAt(root, name);
    return { dir, before: 'none', latest: { root, name, before: latestBefore } };
  }
}

/** The run `<root>/latest` (or latest.txt) names; null when neither is there. */
export function latestName(root: string): string | null {
  try {
    return readlinkSync(join(root, 'latest'));
  } catch {
    /* no symlink: latest.txt, where symlinks are not allowed */
  }
  try {
    return readFileSync(join(root, 'latest.txt'), 'utf8').trim() || null;
  } catch {
    return null;
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
