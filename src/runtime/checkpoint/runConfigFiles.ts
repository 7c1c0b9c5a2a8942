/**
 * What a run directory records about how the run was started, so it can be resumed, repeated and
 * compared (`paratrain report` shows the hyperparameters that differ between runs): `config.yaml`
 * (the resolved config: every default filled in, `auto` choices made, devices counted per process)
 * and `command.txt`, one line per start of the run (a resume adds a line): the command line, or for
 * a run started from the library, the call and its plain options.
 */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { configToYaml } from '../../config/writeYaml.ts';
import { loadConfig } from '../../config/load.ts';
import type { RunConfig } from '../../config/runConfig.ts';
import { writeFileDurable } from '../files/durableFile.ts';

export const CONFIG_FILE = 'config.yaml';
export const COMMAND_FILE = 'command.txt';

/**
 * The config the run last started with (RUN_DIR/config.yaml), which a resume compares the given one
 * with; null when it cannot be read (a resume then compares only what the checkpoint set records).
 */
export function readRunConfig(runDir: string): RunConfig | null {
  try {
    return loadConfig(join(runDir, CONFIG_FILE));
  } catch {
    return null;
  }
}

/** A hash of the model alone: resume refuses a config whose model differs from the saved one. */
export function modelHash(config: RunConfig): string {
  return createHash('sha256').update(JSON.stringify(config.model)).digest('hex').slice(0, 16);
}

/**
 * A hash of the model without its `parallel` marks: a set's model file holds the unsplit model, so
 * a resume may split other layers, or none (resume.ts).
 */
export function unsplitModelHash(config: RunConfig): string {
  const unmarked = JSON.stringify(config.model, (key, value: unknown) => (key === 'parallel' ? undefined : value));
  return createHash('sha256').update(unmarked).digest('hex').slice(0, 16);
}

const quote = (a: string) => (/^[\w@%+=:,./-]+$/.test(a) ? a : `'${a.replaceAll("'", "'\\''")}'`);

/** How a run was started, as it reads in command.txt: the command line, or the library call. */
export interface RunCommand {
  /** the command line (the CLI gives `paratrain train …`) */
  command?: readonly string[];
  /** the library's options, of which the plain values are recorded */
  options?: Record<string, unknown>;
}

/** One line of command.txt. */
export function commandLine(start: RunCommand, argv: readonly string[] = process.argv): string {
  if (start.command) return start.command.map(quote).join(' ');
  // functions, signals and fault plans are not data; sizes and paths are
  const plain = Object.entries(start.options ?? {}).filter(
    ([, v]) =>
      v !== undefined &&
      v !== null &&
      (typeof v !== 'object' || v.constructor === Object || Array.isArray(v)) &&
      typeof v !== 'function',
  );
  return `train(config, ${JSON.stringify(Object.fromEntries(plain))})  # paratrain's library, called by: ${argv.map(quote).join(' ')}`;
}

/** Writes config.yaml and command.txt into the run directory (`resumed`: command.txt gains a line instead). */
export function writeRunConfig(runDir: string, config: RunConfig, start: RunCommand = {}, resumed = false): void {
  writeFileDurable(join(runDir, CONFIG_FILE), configToYaml(config));
  let before = '';
  if (resumed) {
    try {
      before = readFileSync(join(runDir, COMMAND_FILE), 'utf8');
    } catch {
      /* a run directory from before command.txt */
    }
  }
  writeFileDurable(join(runDir, COMMAND_FILE), `${before}${commandLine(start)}\n`);
}
