/**
 * Checkpoint sets: everything needed to resume a run at a step boundary, in
 * `RUN_DIR/checkpoints/step-<8-digit step>/`:
 *
 *   model.safetensors         the job's model (unsplit weights, state, the job's optimizer state), rank 0
 *   device-<rank>.safetensors each device's own buffers and its strategy's state (deviceState.ts)
 *   state.json                written LAST: a set without it is incomplete and ignored
 *
 * The set is written under `step-<N>.partial` (every device, of every process on a shared file
 * system, writes its own files into it), then rank 0 writes state.json and renames the directory;
 * the parent is fsync'd. The last `keepLast` complete sets are kept. At start, leftovers of a dead
 * writer (`*.partial`, `*.tmp-<pid>`, a set without state.json) are removed.
 */
import { existsSync, mkdirSync, readFileSync, readdirSync, renameSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { fsyncDir, removeStaleTemps, writeFileDurable } from '../files/durableFile.ts';
import { crashPoint } from '../faults/crashPoints.ts';
import type { TrackerState } from '../events/tracking.ts';

export const CHECKPOINTS_DIR = 'checkpoints';
export const SET_STATE_FILE = 'state.json';
const SET_NAME = /^step-(\d{8,})$/;

/** state.json: where in the run the set was taken, and by what job. */
export interface SetState {
  format: 'paratrain-set-1';
  /** steps done (global step of the next step to run) */
  step: number;
  /** epoch of the next step, and steps of that epoch already done */
  epoch: number;
  stepInEpoch: number;
  /** devices of the whole job, over `processes` processes */
  devices: number;
  processes: number;
  strategy: string;
  /** the job's global batch and steps per epoch (resumed on other devices, the job keeps them) */
  globalBatch: number;
  stepsPerEpoch: number;
  /** processWorld.configHash of the job's config, and a hash of its model alone (what resume checks) */
  configHash: string;
  modelHash: string;
  /** unix ms */
  time: number;
  /**
   * the watched metrics' records as of this step (train.best, train.earlyStopping): a resumed run
   * goes on from them, so it neither overwrites a better model-best.safetensors nor restarts its patience
   */
  tracking?: { best?: TrackerState; earlyStopping?: TrackerState };
}

export const setName = (step: number) => `step-${String(step).padStart(8, '0')}`;
export const deviceFileName = (rank: number) => `device-${rank}.safetensors`;
export const SET_MODEL_FILE = 'model.safetensors';

/** The directory the devices write a set's files into (created by whoever gets there first). */
export function partialSetDir(runDir: string, step: number): string {
  const dir = join(runDir, CHECKPOINTS_DIR, `${setName(step)}.partial`);
  mkdirSync(dir, { recursive: true });
  return dir;
}

/**
 * Completes the set of `state.step` once every device has written its files: state.json last,
 * then the rename, then the older sets beyond `keepLast` go. Returns the set's directory.
 */
export function completeSet(runDir: string, state: SetState, keepLast: number): string {
  const root = join(runDir, CHECKPOINTS_DIR);
  const partial = partialSetDir(runDir, state.step);
  crashPoint('set-files');
  writeFileDurable(join(partial, SET_STATE_FILE), `${JSON.stringify(state, null, 2)}\n`);
  crashPoint('set-state');
  const dir = join(root, setName(state.step));
  // a set of the same step from an earlier attempt (resumed before it) is replaced
  if (existsSync(dir)) rmSync(dir, { recursive: true, force: true });
  renameSync(partial, dir);
  fsyncDir(root);
  crashPoint('set-renamed');
  for (const old of completeSets(runDir).slice(0, -keepLast)) rmSync(old.dir, { recursive: true, force: true });
  return dir;
}

/** Reads a set's state.json, or null when the set is incomplete or unreadable. */
function readSetState(dir: string): SetState | null {
  try {
    const s = JSON.parse(readFileSync(join(dir, SET_STATE_FILE), 'utf8')) as SetState;
    return s.format === 'paratrain-set-1' && Number.isInteger(s.step) ? s : null;
  } catch {
    return null;
  }
}

/** The complete sets of a run, oldest first. */
export function completeSets(runDir: string): { dir: string; state: SetState }[] {
  const root = join(runDir, CHECKPOINTS_DIR);
  let names: string[];
  try {
    names = readdirSync(root);
  } catch {
    return [];
  }
  const sets: { dir: string; state: SetState }[] = [];
  for (const name of names) {
    if (!SET_NAME.test(name)) continue;
    const dir = join(root, name);
    const state = readSetState(dir);
    if (state) sets.push({ dir, state });
  }
  return sets.sort((a, b) => a.state.step - b.state.step);
}

/** The newest complete set, or null. */
export function latestCompleteSet(runDir: string): { dir: string; state: SetState } | null {
  return completeSets(runDir).at(-1) ?? null;
}

/**
 * Removes what a dead writer left in a run directory: `*.tmp-<pid>` files of a dead process (a
 * killed checkpoint write), partial sets and sets without state.json. Returns what it removed.
 */
export function removeLeftovers(runDir: string): string[] {
  const removed = removeStaleTemps(runDir);
  const root = join(runDir, CHECKPOINTS_DIR);
  removed.push(...removeStaleTemps(root).map((n) => join(CHECKPOINTS_DIR, n)));
  let names: string[] = [];
  try {
    names = readdirSync(root);
  } catch {
    /* no sets yet */
  }
  for (const name of names) {
    const dir = join(root, name);
    const incomplete = name.endsWith('.partial') || (SET_NAME.test(name) && readSetState(dir) === null);
    if (!incomplete) continue;
    rmSync(dir, { recursive: true, force: true });
    removed.push(join(CHECKPOINTS_DIR, name));
  }
  return removed;
}
