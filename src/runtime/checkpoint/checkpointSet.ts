/**
 * Checkpoint sets: everything needed to resume a run at a step boundary, in
 * `RUN_DIR/checkpoints/step-<8-digit step>/`:
 *
 *   model.safetensors         the job's model (unsplit weights, state, the job's optimizer state), rank 0
 *   device-<rank>.safetensors each device's own buffers and its strategy's state (deviceState.ts)
 *   state.json                written LAST, listing every other file with its size and SHA-256
 *
 * The set is written under `step-<N>.partial` (every device, of every process on a shared file
 * system, writes its own files into it), then rank 0 records the files, writes state.json and
 * renames the directory; the parent is fsync'd. The last `keepLast` complete sets are kept. A
 * resume removes only a dead writer's own leftovers (`*.partial`, `*.tmp-<pid>`); a set that fails
 * verification is moved to `checkpoints/damaged/`, one that a resume from an older set passes over
 * to `checkpoints/superseded/` (resumeSet.ts): neither is ever deleted.
 */
import { existsSync, mkdirSync, readFileSync, readdirSync, renameSync, rmSync } from 'node:fs';
import { basename, join } from 'node:path';
import { recordSetFiles, type SetFileRecord } from './setIntegrity.ts';
import { fsyncDir, removeStaleTemps, writeFileDurable } from '../files/durableFile.ts';
import { crashPoint } from '../faults/crashPoints.ts';
import type { TrackerState } from '../events/tracking.ts';

export const CHECKPOINTS_DIR = 'checkpoints';
export const SET_STATE_FILE = 'state.json';
export const SET_NAME = /^step-(\d{8,})$/;
/** Where sets that failed verification, and newer sets a resume from an older one passed over, are kept. */
export type SetShelf = 'damaged' | 'superseded';

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
  /** every other file of the set, by name: its size and SHA-256 (absent in sets of earlier versions) */
  files?: Record<string, SetFileRecord>;
  /** train.pipeline of a pipelined job: its device files hold stages, so another layout resumes from the model file */
  pipeline?: { stages: number; boundaries?: number[] };
  /**
   * devices each `parallel: model` layer was split over (1: none split), which the device files'
   * shards are cut for; and the model's hash without its marks. Another split resumes from the
   * model file (device/deviceLayout.ts); absent in sets of earlier versions
   */
  splitGroup?: number;
  unsplitModelHash?: string;
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
  const recorded: SetState = { ...state, files: recordSetFiles(partial, SET_STATE_FILE) };
  writeFileDurable(join(partial, SET_STATE_FILE), `${JSON.stringify(recorded, null, 2)}\n`);
  crashPoint('set-state');
  const dir = join(root, setName(state.step));
  // a set of the same step from an earlier attempt is kept aside, not overwritten (a resume moves
  // the sets newer than its own there first, so this is a safeguard)
  if (existsSync(dir)) moveSetAside(runDir, dir, 'superseded');
  renameSync(partial, dir);
  fsyncDir(root);
  crashPoint('set-renamed');
  for (const old of completeSets(runDir).slice(0, -keepLast)) rmSync(old.dir, { recursive: true, force: true });
  return dir;
}

/** A set's state.json, or what is wrong with it (one phrase: missing, cut short, not a set's). */
export function readSetStateOrFault(dir: string): { state: SetState } | { fault: string } {
  let text: string;
  try {
    text = readFileSync(join(dir, SET_STATE_FILE), 'utf8');
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    return { fault: code === 'ENOENT' ? 'state.json is missing' : `state.json cannot be read (${code})` };
  }
  let s: SetState;
  try {
    s = JSON.parse(text) as SetState;
  } catch (e) {
    return { fault: `state.json is cut short or garbled (${(e as Error).message})` };
  }
  if (s === null || typeof s !== 'object' || s.format !== 'paratrain-set-1' || !Number.isInteger(s.step))
    return { fault: "state.json is not a checkpoint set's (no format 'paratrain-set-1' and integer step)" };
  return { state: s };
}

/** Reads a set's state.json, or null when the set is incomplete or unreadable. */
function readSetState(dir: string): SetState | null {
  const read = readSetStateOrFault(dir);
  return 'state' in read ? read.state : null;
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

/** Every set folder of a run (complete or not: named `step-<N>`), newest first, with the step its name gives. */
export function setFolders(runDir: string): { dir: string; name: string; step: number }[] {
  const root = join(runDir, CHECKPOINTS_DIR);
  let names: string[];
  try {
    names = readdirSync(root);
  } catch {
    return [];
  }
  return names
    .filter((name) => SET_NAME.test(name))
    .map((name) => ({ dir: join(root, name), name, step: Number(SET_NAME.exec(name)![1]) }))
    .sort((a, b) => b.step - a.step);
}

/**
 * Moves a set folder to `checkpoints/<shelf>/<name>` (`<name>.2`, … when that is taken) and
 * returns where it went: sets a user may still want are kept, never deleted.
 */
export function moveSetAside(runDir: string, dir: string, shelf: SetShelf): string {
  const into = join(runDir, CHECKPOINTS_DIR, shelf);
  mkdirSync(into, { recursive: true });
  const name = basename(dir);
  let to = join(into, name);
  for (let n = 2; existsSync(to); n++) to = join(into, `${name}.${n}`);
  renameSync(dir, to);
  fsyncDir(into);
  fsyncDir(join(runDir, CHECKPOINTS_DIR));
  return to;
}

/**
 * Removes what a dead writer left in a run directory: `*.tmp-<pid>` files of a dead process (a
 * killed checkpoint write) and partial sets (`step-<N>.partial`: the run's own unfinished
 * writes; the run directory's lock means no live writer owns one). Returns what it removed.
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
    if (!name.endsWith('.partial')) continue;
    rmSync(join(root, name), { recursive: true, force: true });
    removed.push(join(CHECKPOINTS_DIR, name));
  }
  return removed;
}
