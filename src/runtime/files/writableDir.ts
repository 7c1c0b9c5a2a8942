/**
 * Making a run directory that can be written, or one clear error and nothing left behind.
 *
 * Node 20's `mkdirSync(path, { recursive: true })` spins forever at 100% CPU where mkdir(2) answers
 * ENOENT for a path whose parent exists (/proc/x, /sys/x: the parent exists but refuses new
 * entries, and the recursive walk retries the same mkdir without end). So the directories are made
 * one at a time here, from the deepest existing ancestor down, each error named once; then a probe
 * file is written and removed, so a read-only mount fails here, not at the first metrics line.
 */
import { mkdirSync, rmdirSync, statSync, unlinkSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';

const FIX = 'choose an --out (or run from a directory) on a writable file system';

/** One line for a failed file-system call on the run directory `dir`. */
export function runDirError(dir: string, e: unknown): Error {
  const err = e as NodeJS.ErrnoException;
  const why = err.code ? `${err.code}: ${describeCode(err.code)}` : String(err.message ?? e);
  return new Error(`cannot use run directory ${dir} (${why}); ${FIX}`, { cause: e });
}

function describeCode(code: string): string {
  switch (code) {
    case 'EACCES':
    case 'EPERM':
      return 'permission denied';
    case 'EROFS':
      return 'read-only file system';
    case 'ENOENT':
      return 'this place does not accept new directories';
    case 'ENOTDIR':
      return 'a part of the path is a file, not a directory';
    case 'ENOSPC':
      return 'no space left on the device';
    case 'EDQUOT':
      return 'disk quota exceeded';
    case 'ENAMETOOLONG':
      return 'the path is too long';
    default:
      return 'the file system refused';
  }
}

/**
 * Creates `dir` and its missing parents (non-recursive mkdir each) and checks that a file can be
 * written in it. On any failure, removes the directories it created and throws one clear Error.
 */
export function makeWritableDir(dir: string): void {
  const missing: string[] = [];
  for (let p = resolve(dir); ; p = dirname(p)) {
    let isDir: boolean;
    try {
      isDir = statSync(p).isDirectory();
    } catch (e) {
      const code = (e as NodeJS.ErrnoException).code;
      if (code !== 'ENOENT') throw runDirError(dir, e);
      missing.push(p);
      if (dirname(p) === p) break;
      continue;
    }
    if (!isDir)
      throw new Error(`cannot use run directory ${dir}: ${p} is a file, not a directory; choose another --out`);
    break;
  }
  const created: string[] = [];
  try {
    for (const p of missing.reverse()) {
      try {
        mkdirSync(p);
        created.push(p);
      } catch (e) {
        // made meanwhile by another run: fine if it is a directory
        if ((e as NodeJS.ErrnoException).code !== 'EEXIST' || !statSync(p).isDirectory()) throw e;
      }
    }
    const probe = join(dir, `.paratrain-write-test-${process.pid}`);
    writeFileSync(probe, '');
    unlinkSync(probe);
  } catch (e) {
    for (const p of created.reverse()) {
      try {
        rmdirSync(p);
      } catch {
        /* not ours to clean any more */
      }
    }
    throw runDirError(dir, e);
  }
}
