/**
 * Taking back a run directory whose job never formed (a refusal when the processes meet: their
 * data, config or secret differ, or one never came), so the same `--out` can be run again without
 * `--force`. Only what this run made goes: the files it names, then the directory itself when this
 * run created it (removed only once empty, never recursively), and a timestamped directory's
 * `latest` goes back to the run it named before. A directory that held files before (--force), or a
 * resumed run's, is never passed here. The caller releases the run's lock first.
 */
import { rmdirSync, unlinkSync } from 'node:fs';
import { join } from 'node:path';
import { latestName, pointLatestAt, type MadeRunDir } from './runDir.ts';

function removeIfThere(path: string): void {
  try {
    unlinkSync(path);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'ENOENT') throw e;
  }
}

/**
 * Removes `files` (names in `made.dir` this run wrote) and, when this run created it, the directory.
 * Returns what was done, for one line (or what was left and why); never throws.
 */
export function unmakeRunDir(made: MadeRunDir, files: readonly string[]): string {
  if (made.before === 'files') return `kept run directory ${made.dir} (it held files before this run)`;
  try {
    for (const name of files) removeIfThere(join(made.dir, name));
    if (made.before === 'empty') return `removed the files this run wrote in ${made.dir} (${files.join(', ')})`;
    rmdirSync(made.dir);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    const why = code === 'ENOTEMPTY' || code === 'EEXIST' ? 'it holds files this run did not write' : String(e);
    return `left run directory ${made.dir} in place (${why}); remove it, or pass --force, to run again with it`;
  }
  const latest = made.latest;
  // runs/latest names the run before this one again, unless a newer run has taken it since
  if (latest && latestName(latest.root) === latest.name) {
    if (latest.before !== null) pointLatestAt(latest.root, latest.before);
    else {
      try {
        removeIfThere(join(latest.root, 'latest'));
        removeIfThere(join(latest.root, 'latest.txt'));
      } catch {
        // pointing at the newest run is a convenience (runDir.ts): a stale pointer is no failure
      }
    }
  }
  return `removed run directory ${made.dir} (this run made it)`;
}
