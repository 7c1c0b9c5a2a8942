/** Reading the files a data config names, with errors that say which field and what to fix. */
import { readFileSync, statSync } from 'node:fs';
import { isAbsolute, resolve } from 'node:path';

/**
 * A path from the data config: absolute as given; relative ones resolve against `data.dir` when set,
 * else the working directory (the same rule as data.dir itself, so a run directory's copy of the
 * config, resumed from elsewhere, reads the same files from the same place).
 */
export function resolveDataPath(path: string, dir: string | undefined): string {
  if (isAbsolute(path)) return path;
  return dir === undefined ? path : resolve(dir, path);
}

/** A file's bytes, or an error naming it and `field` (the config key that named it). */
export function readDataFile(path: string, field?: string): Buffer {
  const what = field ? `${field}: ` : '';
  let isDir = false;
  try {
    isDir = statSync(path).isDirectory();
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code === 'ENOENT')
      throw new Error(
        `${what}file ${path} not found; check the path (relative paths start at data.dir, else the working directory ${process.cwd()})`,
      );
    throw new Error(`${what}cannot read ${path}: ${(e as Error).message}`);
  }
  if (isDir) throw new Error(`${what}${path} is a directory; expected a file`);
  try {
    return readFileSync(path);
  } catch (e) {
    throw new Error(`${what}cannot read ${path}: ${(e as Error).message}`);
  }
}

/** Whether `path` is an existing directory. */
export function isDirectory(path: string): boolean {
  try {
    return statSync(path).isDirectory();
  } catch {
    return false;
  }
}
