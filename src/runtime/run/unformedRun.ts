/**
 * A job of several processes that fails before its first step never formed: a refusal when the
 * processes meet (another process's data, model config or secret differ; a process never came) or
 * a failure on the way there. Process 0 had already made the run directory, under its lock; what it
 * wrote there (config.yaml, command.txt, metrics.jsonl's start) is taken back, so the same `--out`
 * runs again without `--force`. Until the first step the other processes write nothing there
 * (events/processMetrics.ts), and a resumed run's directory is never taken back (openRun.ts gives
 * no MadeRunDir for it).
 */
import { METRICS_FILE } from '../events/metrics.ts';
import { COMMAND_FILE, CONFIG_FILE } from '../checkpoint/runConfigFiles.ts';
import type { MadeRunDir } from '../files/runDir.ts';
import type { RunLockHolder } from '../files/runLock.ts';
import { unmakeRunDir } from '../files/unmakeRunDir.ts';

/** What a new run writes before its first step. */
const START_FILES = [CONFIG_FILE, COMMAND_FILE, METRICS_FILE];

/**
 * Releases the run's lock and takes back what this run made of `made` (nothing of a directory that
 * held files before); returns the one line to say. The run's metrics writer is closed first.
 */
export function takeBackUnformedRun(made: MadeRunDir, lock: RunLockHolder): string {
  lock.release();
  return `the job did not form: ${unmakeRunDir(made, START_FILES)}`;
}
