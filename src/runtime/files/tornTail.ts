/**
 * Line files appended to across runs (metrics.jsonl): a write cut short (a crash, a full disk) leaves
 * a last line without its '\n', and whatever is appended next would be glued to it, so the next
 * run's first event would be lost in one unreadable line. Before appending, the torn tail is cut
 * back to the last whole line; its bytes are kept, one line per repair, in `<file>.torn` beside it
 * (written and fsync'd before the cut, so they are never lost).
 */
import { closeSync, fstatSync, fsyncSync, ftruncateSync, openSync, readSync, writeSync } from 'node:fs';
import { writeError } from './writeError.ts';

const NEWLINE = 0x0a;

export interface TornTail {
  /** bytes cut from the end of the file */
  bytes: number;
  /** where they are kept */
  keptIn: string;
}

/** Where the last '\n' of the open file `fd` of `size` bytes is (-1: none). */
function lastNewline(fd: number, size: number): number {
  const chunk = Buffer.alloc(Math.min(size, 64 * 1024));
  for (let end = size; end > 0; ) {
    const start = Math.max(0, end - chunk.length);
    const n = readSync(fd, chunk, 0, end - start, start);
    const at = chunk.subarray(0, n).lastIndexOf(NEWLINE);
    if (at >= 0) return start + at;
    end = start;
  }
  return -1;
}

function appendKept(path: string, bytes: Buffer): void {
  try {
    const fd = openSync(path, 'a');
    try {
      writeSync(fd, Buffer.concat([bytes, Buffer.from('\n')]));
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
  } catch (e) {
    throw writeError(path, e);
  }
}

/**
 * Cuts `path` back to its last whole line when it does not end with '\n', keeping the cut bytes in
 * `<path>.torn`. Returns what it cut, or null when there was nothing to repair (no file, an empty
 * one, one that ends with '\n', or not a regular file).
 */
export function repairTornTail(path: string): TornTail | null {
  let fd: number;
  try {
    fd = openSync(path, 'r+');
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw writeError(path, e);
  }
  try {
    const st = fstatSync(fd);
    if (!st.isFile() || st.size === 0) return null;
    const keep = lastNewline(fd, st.size) + 1;
    if (keep === st.size) return null;
    const torn = Buffer.alloc(st.size - keep);
    readSync(fd, torn, 0, torn.length, keep);
    const keptIn = `${path}.torn`;
    appendKept(keptIn, torn);
    try {
      ftruncateSync(fd, keep);
      fsyncSync(fd);
    } catch (e) {
      throw writeError(path, e);
    }
    return { bytes: torn.length, keptIn };
  } finally {
    closeSync(fd);
  }
}
