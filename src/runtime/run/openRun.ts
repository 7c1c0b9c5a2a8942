/**
 * Where a run's files go and where it starts: a fresh run directory (with config.yaml and
 * command.txt), or the directory of a run to resume (leftovers of a dead writer removed, the newest
 * complete checkpoint set found, the config fitted to the saved job). Process 0 locks the directory
 * (files/runLock.ts) before it looks inside: before a new run's non-empty check, before a resume's
 * cleanup, so a second run on the same directory is refused and deletes nothing.
 */
import type { RunConfig } from '../../config/runConfig.ts';
import { makeRunDir, type MadeRunDir } from '../files/runDir.ts';
import type { RunLockHolder } from '../files/runLock.ts';
import { checkResumeDir, planResume, type ResumePlan } from './resume.ts';
import { initialWeightsOf } from '../checkpoint/initFrom.ts';
import { planInitFrom } from '../checkpoint/initFromPlan.ts';
import type { InitFromInput } from '../../config/schema/initFrom.ts';
import { writeRunConfig, type RunCommand } from '../checkpoint/runConfigFiles.ts';
import type { CheckpointSetup } from '../checkpoint/checkpointSetup.ts';
import type { JobShape } from '../job/jobShape.ts';

export interface RunStart {
  out?: string;
  force?: boolean;
  /** a run directory to continue from its newest complete checkpoint set */
  resume?: string;
  /** a checkpoint (model.safetensors) whose weights a new run starts from, or `{ path, reinit, freeze }`: in place of train.initFrom's */
  initFrom?: InitFromInput;
  log?: (message: string) => void;
  /** the command line that started the run, for command.txt (absent: a library call) */
  command?: readonly string[];
}

/** Checks the resume/fine-tune options and fits the config to a resumed job before any work: errors name the fix. */
export function planRunStart(
  start: RunStart,
  config: RunConfig,
  shape: JobShape,
  lock?: RunLockHolder,
): { config: RunConfig; resume: ResumePlan | null } {
  if (start.resume !== undefined && start.initFrom !== undefined) {
    throw new Error(
      "--resume and --init-from: give one; --resume continues a run, --init-from starts a new one from a checkpoint's weights",
    );
  }
  if (start.resume !== undefined && start.out !== undefined && start.out !== start.resume) {
    throw new Error(
      `--out ${start.out} with --resume ${start.resume}: a resumed run writes into its own directory; leave out --out`,
    );
  }
  // fine-tuning's layers checked against the model (and a new run's checkpoint); which start fresh recorded
  config = planInitFrom(config, start.initFrom, { resume: start.resume !== undefined, log: start.log });
  if (start.resume === undefined) return { config, resume: null };
  // --resume may name one of the run's sets: the run directory is the one locked and opened
  const resumeDir = checkResumeDir(start.resume);
  // process 0 cleans what a dead writer left, once no other run can be writing there
  if (shape.process === 0) lock?.take(resumeDir);
  const resume = planResume(start.resume, config, shape.devices, shape.process === 0, start.log);
  return { config: resume.config, resume };
}

/**
 * Opens the run directory (process 0; '' elsewhere) and says what the devices do about checkpoint
 * sets. `config` is what config.yaml records. `made`: a new run's directory, and what was there
 * before (unformedRun.ts takes it back when the job does not form); null for a resumed run.
 */
export function openRunDir(
  start: RunStart,
  config: RunConfig,
  resume: ResumePlan | null,
  shape: JobShape,
  configHash: string,
  lock?: RunLockHolder,
): { runDir: string; checkpoints: CheckpointSetup; made: MadeRunDir | null } {
  let runDir = '';
  let made: MadeRunDir | null = null;
  const leader = shape.process === 0;
  if (leader) {
    if (resume) runDir = resume.runDir;
    else {
      made = makeRunDir({ out: start.out, force: start.force, lock });
      runDir = made.dir;
    }
    const how: RunCommand = start.command ? { command: start.command } : { options: start as Record<string, unknown> };
    writeRunConfig(runDir, config, how, start.resume !== undefined);
  }
  // processes other than 0 write their devices' set files only into a directory they were told of
  const deviceDir = leader ? runDir : (resume?.runDir ?? start.out ?? null);
  return {
    runDir,
    made,
    checkpoints: {
      runDir: deviceDir,
      processes: shape.processes,
      configHash,
      resume: resume?.point ?? null,
      initFrom: resume ? null : initialWeightsOf(config),
    },
  };
}
