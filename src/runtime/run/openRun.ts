/**
 * Where a run's files go and where it starts: a fresh run directory (with config.yaml and
 * command.txt), or the directory of a run to resume (leftovers of a dead writer removed, the newest
 * complete checkpoint set found, the config fitted to the saved job).
 */
import type { RunConfig } from '../../config/runConfig.ts';
import { createRunDir } from '../files/runDir.ts';
import { checkResumeDir, planResume, type ResumePlan } from './resume.ts';
import { checkInitFrom } from '../checkpoint/initFrom.ts';
import { writeRunConfig, type RunCommand } from '../checkpoint/runConfigFiles.ts';
import type { CheckpointSetup } from '../checkpoint/checkpointSetup.ts';
import type { JobShape } from '../job/jobShape.ts';

export interface RunStart {
  out?: string;
  force?: boolean;
  /** a run directory to continue from its newest complete checkpoint set */
  resume?: string;
  /** a checkpoint (model.safetensors) whose weights a new run starts from */
  initFrom?: string;
  log?: (message: string) => void;
  /** the command line that started the run, for command.txt (absent: a library call) */
  command?: readonly string[];
}

/** Checks the resume/fine-tune options and fits the config to a resumed job before any work: errors name the fix. */
export function planRunStart(
  start: RunStart,
  config: RunConfig,
  shape: JobShape,
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
  if (start.initFrom !== undefined) checkInitFrom(start.initFrom, config);
  if (start.resume === undefined) return { config, resume: null };
  checkResumeDir(start.resume);
  // process 0 cleans what a dead writer left
  const resume = planResume(start.resume, config, shape.devices, shape.process === 0, start.log);
  return { config: resume.config, resume };
}

/**
 * Opens the run directory (process 0; '' elsewhere) and says what the devices do about checkpoint
 * sets. `config` is what config.yaml records.
 */
export function openRunDir(
  start: RunStart,
  config: RunConfig,
  resume: ResumePlan | null,
  shape: JobShape,
  configHash: string,
): { runDir: string; checkpoints: CheckpointSetup } {
  let runDir = '';
  const leader = shape.process === 0;
  if (leader) {
    runDir = start.resume ?? createRunDir({ out: start.out, force: start.force });
    const how: RunCommand = start.command ? { command: start.command } : { options: start as Record<string, unknown> };
    writeRunConfig(runDir, config, how, start.resume !== undefined);
  }
  // processes other than 0 write their devices' set files only into a directory they were told of
  const deviceDir = leader ? runDir : (start.resume ?? start.out ?? null);
  return {
    runDir,
    checkpoints: {
      runDir: deviceDir,
      processes: shape.processes,
      configHash,
      resume: resume?.point ?? null,
      initFrom: start.initFrom ?? null,
    },
  };
}
