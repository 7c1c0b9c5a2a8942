/** Reading the files a data config names, with errors that say which field and what to fix. */
import { readFileSync, statSync } from 'node:fs';
import { isAbsolute, resolve } from 'node:path';

/**
 * A path from the data config: absolute as given; relative ones resolve against `data.dir` when set,
 * else the working directory. A config file's data.dir is always set and absolute (its own folder
 * unless it names another, config/dataPaths.ts); only a config written in code reaches the else.
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
        `${what}file ${path} not found; check the path (relative paths start at data.dir: a config file's own folder unless it sets another)`,
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
