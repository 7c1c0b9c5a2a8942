/**
 * Which checkpoint set a resume starts from. Every candidate is verified first (setIntegrity.ts:
 * the files state.json lists, by size and SHA-256, and the files the saved job must have written).
 * Without a named set, the newest set that verifies is used; each newer one that failed is moved
 * to `checkpoints/damaged/` with one line saying which file failed and why. A named set
 * (`--resume RUN/checkpoints/step-N`) is used as it is, and once the resume is sure to go ahead the
 * sets newer than it are moved to `checkpoints/superseded/` (supersedeNewerSets). Nothing is deleted. Only
 * process 0 (`clean`) moves sets; the other processes of a job skip the same ones.
 */
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import type { RunConfig } from '../../config/runConfig.ts';
import { needsParameterServer, survivesLostDevices } from '../../parallel/strategies/index.ts';
import {
  CHECKPOINTS_DIR,
  deviceFileName,
  moveSetAside,
  readSetStateOrFault,
  SET_MODEL_FILE,
  setFolders,
  type SetShelf,
  type SetState,
} from './checkpointSet.ts';
import type { ResumePoint } from './checkpointSetup.ts';
import { setFilesFault } from './setIntegrity.ts';
import { SET_SERVER_FILE } from './serverState.ts';

export interface ResumeSetOptions {
  runDir: string;
  /** the step of the set `--resume` named (RUN/checkpoints/step-N), or null: the newest set that verifies */
  named: number | null;
  config: RunConfig;
  /** process 0: moves the sets that failed, and those a named set supersedes (the others only skip them) */
  clean: boolean;
  /** how the refusal names the request, e.g. `--resume runs/latest` */
  asked: string;
  log?: (message: string) => void;
}

/** The files a set must hold beyond those its state.json lists, and why (for the message). */
function neededFiles(state: SetState, config: RunConfig): { names: string[]; why: string } {
  const names = [SET_MODEL_FILE, deviceFileName(0)];
  if (state.files) return { names, why: 'every set has it' };
  // a set of an earlier version lists nothing: what its job must have written is checked instead
  // (the config's strategy when it is the saved one: easgd's mode decides)
  const spec = state.devices > 1 && config.train.strategy.type === state.strategy ? config.train.strategy : null;
  if (spec && !survivesLostDevices(spec)) for (let r = 1; r < state.devices; r++) names.push(deviceFileName(r));
  if (spec && needsParameterServer(spec)) names.push(SET_SERVER_FILE);
  return { names, why: `a ${state.strategy} set of ${state.devices} device${state.devices === 1 ? '' : 's'} has it` };
}

/** What is wrong with the set in `dir` (state.json, then its files), or its state when it verifies. */
export function verifySet(dir: string, step: number, config: RunConfig): { state: SetState } | { fault: string } {
  const read = readSetStateOrFault(dir);
  if ('fault' in read) return read;
  const { state } = read;
  if (state.step !== step) return { fault: `state.json says step ${state.step}, the folder's name step ${step}` };
  const { names, why } = neededFiles(state, config);
  const fault = setFilesFault(dir, state.files, names, why);
  if (fault === null) return read;
  const shared =
    state.processes > 1 && fault.startsWith('device-')
      ? " (in a job of several processes every process writes its devices' files only when --out names one directory on a shared file system)"
      : '';
  return { fault: `${fault}${shared}` };
}

/** The set to resume from, verified; throws one line naming each set and its fault when none verifies. */
export function chooseResumeSet(o: ResumeSetOptions): ResumePoint {
  const shelve = (dir: string, name: string, shelf: SetShelf, what: string): string => {
    if (!o.clean) {
      o.log?.(`checkpoint set ${name} ${what}; skipped`);
      return dir;
    }
    const to = moveSetAside(o.runDir, dir, shelf);
    o.log?.(`checkpoint set ${name} ${what}; moved to ${to}`);
    return to;
  };
  const folders = setFolders(o.runDir);
  const chosen = o.named !== null ? namedSet(o, o.named, folders, shelve) : newestVerified(o, folders, shelve);
  if (!chosen.state.files) {
    o.log?.(
      `note: checkpoint set ${chosen.dir} was written by an earlier version, without checksums: its files were checked for presence only`,
    );
  }
  return chosen;
}

type Folders = ReturnType<typeof setFolders>;
type Shelve = (dir: string, name: string, shelf: SetShelf, what: string) => string;

function namedSet(o: ResumeSetOptions, step: number, folders: Folders, shelve: Shelve): ResumePoint {
  const named = folders.find((f) => f.step === step);
  if (!named) {
    throw new Error(
      `${o.asked}: the run has no checkpoint set of step ${step} (its sets: ${folders.map((f) => f.name).join(', ') || 'none'}); name one of them, or give the run directory to resume from its newest`,
    );
  }
  const checked = verifySet(named.dir, named.step, o.config);
  if ('fault' in checked) {
    const to = shelve(named.dir, named.name, 'damaged', `failed verification: ${checked.fault}`);
    throw new Error(
      `${o.asked}: checkpoint set ${named.name} failed verification (${checked.fault})${to !== named.dir ? `; it was moved to ${to}` : ''}; ` +
        `resume from the run directory (--resume ${o.runDir}) to use its newest set that verifies`,
    );
  }
  return { dir: named.dir, state: checked.state };
}

/**
 * Process 0, resuming from a named set: the sets newer than it go to `checkpoints/superseded/`
 * (the resumed run writes its own sets of those steps; a later `--resume RUN_DIR` must not take
 * the abandoned ones for its newest).
 */
export function supersedeNewerSets(runDir: string, from: ResumePoint, log?: (message: string) => void): void {
  const newer = setFolders(runDir).filter((f) => f.step > from.state.step);
  if (newer.length === 0) return;
  for (const f of newer) moveSetAside(runDir, f.dir, 'superseded');
  log?.(
    `resuming from ${from.dir} as asked: the newer set${newer.length === 1 ? '' : 's'} ${newer.map((f) => f.name).join(', ')} ` +
      `moved to ${join(runDir, CHECKPOINTS_DIR, 'superseded')} (kept; a later --resume ${runDir} does not use them)`,
  );
}

function newestVerified(o: ResumeSetOptions, folders: Folders, shelve: Shelve): ResumePoint {
  const failed: { name: string; step: number; fault: string }[] = [];
  let chosen: ResumePoint | null = null;
  for (const f of folders) {
    // sets older than the one chosen are not hashed; a set without a readable state.json is shelved all the same
    const checked: { state: SetState } | { fault: string } = chosen
      ? readSetStateOrFault(f.dir)
      : verifySet(f.dir, f.step, o.config);
    if ('fault' in checked) {
      failed.push({ name: f.name, step: f.step, fault: checked.fault });
      shelve(f.dir, f.name, 'damaged', `failed verification: ${checked.fault}`);
    } else if (!chosen) chosen = { dir: f.dir, state: checked.state };
  }
  const root = join(o.runDir, CHECKPOINTS_DIR);
  if (!chosen && failed.length === 0) {
    const aside = (['damaged', 'superseded'] as const).filter((s) => nonEmpty(join(root, s)));
    throw new Error(
      aside.length === 0
        ? `${o.asked}: no complete checkpoint set in ${root} (the run stopped before its first one); start the run again without --resume, with train.checkpointEvery: { steps: N } to save sooner`
        : `${o.asked}: no checkpoint set in ${root} to resume from (earlier resumes kept sets aside in ${aside.map((s) => join(root, s)).join(' and ')}); ` +
            `move one back into ${root} to resume from it, or start the run again without --resume`,
    );
  }
  if (!chosen) {
    throw new Error(
      `${o.asked}: no checkpoint set verifies — ${failed.map((f) => `${f.name}: ${f.fault}`).join('; ')}; ` +
        `${o.clean ? `they were moved to ${join(root, 'damaged')}, nothing was deleted` : 'process 0 moves them aside'}; ` +
        `start the run again without --resume (or a new run from a set's weights, if its model.safetensors is intact, with --init-from SET/model.safetensors)`,
    );
  }
  const skipped = failed.filter((f) => f.step > chosen.state.step);
  if (skipped.length > 0) {
    o.log?.(
      `resuming from ${chosen.dir} (step ${chosen.state.step}), the newest set that verifies: the newer ${skipped.map((f) => f.name).join(', ')} failed verification`,
    );
  }
  return chosen;
}

function nonEmpty(dir: string): boolean {
  try {
    return existsSync(dir) && readdirSync(dir).length > 0;
  } catch {
    return false;
  }
}
