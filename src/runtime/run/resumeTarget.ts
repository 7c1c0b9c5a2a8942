/**
 * What `--resume PATH` names: a run directory (resume from its newest set that verifies), or one
 * checkpoint set of a run, `RUN_DIR/checkpoints/step-N` (resume from exactly that set; the run
 * directory is its grandparent). `step-32` stands for `step-00000032`.
 */
import { existsSync, statSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { CHECKPOINTS_DIR, SET_STATE_FILE, setName } from '../checkpoint/checkpointSet.ts';

export interface ResumeTarget {
  runDir: string;
  /** the named set's step, or null: the run's newest set that verifies */
  step: number | null;
}

const STEP_FOLDER = /^step-(\d+)$/;

/** Resolves `--resume PATH` and checks before any work that it exists: errors are one line naming the fix. */
export function resumeTarget(path: string): ResumeTarget {
  const m = STEP_FOLDER.exec(basename(path));
  const parent = dirname(path);
  if (m && basename(parent) === CHECKPOINTS_DIR) {
    const step = Number(m[1]);
    const runDir = dirname(parent);
    if (!existsSync(join(parent, setName(step)))) {
      throw new Error(
        `--resume ${path}: no such checkpoint set; name one in ${parent}, or give the run directory (${runDir}) to resume from its newest set that verifies`,
      );
    }
    checkRunDir(path, runDir);
    return { runDir, step };
  }
  checkRunDir(path, path);
  if (m && existsSync(join(path, SET_STATE_FILE))) {
    throw new Error(
      `--resume ${path}: this checkpoint set is not in a run directory; a set resumes in its run, as RUN_DIR/checkpoints/step-N (move it back there), or give the run directory`,
    );
  }
  return { runDir: path, step: null };
}

function checkRunDir(path: string, runDir: string): void {
  if (!existsSync(runDir))
    throw new Error(
      `--resume ${path}: no such run directory; give the directory of the run to continue (e.g. runs/latest)`,
    );
  if (!statSync(runDir).isDirectory())
    throw new Error(`--resume ${path}: not a directory; give the directory of the run to continue (e.g. runs/latest)`);
}
