/**
 * Durable writes and the cleanup of what an interrupted writer leaves. A file is written to
 * `<path>.tmp-<pid>`, fsync'd, renamed over `<path>`, and the directory fsync'd, so after a crash
 * either the old or the complete new file is there; a leftover `*.tmp-<pid>` whose process is
 * gone is removed at the next start (removeStaleTemps).
 */
import { closeSync, fsyncSync, openSync, readdirSync, renameSync, rmSync, unlinkSync, writeSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { writeError } from './writeError.ts';

/** fsync a directory so a rename or a new entry in it survives a crash (best effort: not every platform can). */
export function fsyncDir(dir: string): void {
  try {
    const fd = openSync(dir, 'r');
    try {
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
  } catch {
    /* best effort */
  }
}

/** Writes `text` to `path` atomically and durably; a failure names the file and the fix (writeError.ts). */
export function writeFileDurable(path: string, text: string): void {
  const tmp = `${path}.tmp-${process.pid}`;
  const bytes = Buffer.from(text, 'utf8');
  try {
    const fd = openSync(tmp, 'w');
    try {
      let off = 0;
      while (off < bytes.length) off += writeSync(fd, bytes, off, bytes.length - off);
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
    renameSync(tmp, path);
  } catch (e) {
    try {
      unlinkSync(tmp);
    } catch {
      /* never created */
    }
    throw writeError(path, e);
  }
  fsyncDir(dirname(path));
}

/** True while process `pid` runs on this host (our own pid counts as dead: at start nothing of ours writes yet). */
export function processAlive(pid: number): boolean {
  if (pid === process.pid) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
}

const TEMP_NAME = /\.tmp-(\d+)$/;

/** Removes the `*.tmp-<pid>` files and directories in `dir` whose writer is dead; returns their names. */
export function removeStaleTemps(dir: string): string[] {
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch {
    return [];
  }
  const removed: string[] = [];
  for (const name of names) {
    const m = TEMP_NAME.exec(name);
    if (!m || processAlive(Number(m[1]))) continue;
    rmSync(join(dir, name), { recursive: true, force: true });
    removed.push(name);
  }
  return removed;
}
