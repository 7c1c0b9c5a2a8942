/**
 * A config file's data paths start at the file's own folder, whatever the working directory:
 * `data.dir` becomes absolute (a relative one resolved against the folder; absent, the folder
 * itself, for the types whose files the config names), and so does a speech cache folder. The run
 * directory's copy of the config and the checkpoint's stored one then name the same files from
 * anywhere. Absolute paths stay as they are; `--data DIR`, applied after, still replaces data.dir.
 */
import { isAbsolute, resolve } from 'node:path';
import type { DataSpec } from '../data/spec.ts';

/** `data` with its folder paths absolute, relative ones read from `folder` (the config file's). */
export function dataPathsFrom(data: DataSpec, folder: string): DataSpec {
  const at = (p: string) => (isAbsolute(p) ? p : resolve(folder, p));
  switch (data.dataset) {
    // fashion-mnist without a dir looks in its usual places; speech without one is an error naming data.dir
    case 'fashion-mnist':
      return data.dir === undefined ? data : { ...data, dir: at(data.dir) };
    case 'speech':
      return {
        ...data,
        ...(data.dir === undefined ? {} : { dir: at(data.dir) }),
        ...(data.cacheDir === undefined ? {} : { cacheDir: at(data.cacheDir) }),
      };
    // names given to memoryDataset(), not paths
    case 'memory':
      return data;
    default:
      return { ...data, dir: at(data.dir ?? '.') };
  }
}
