/**
 * What a run directory records about how the run was started, so it can be resumed and repeated:
 * `config.yaml` (the resolved config, as the user's devices per process count them) and
 * `command.txt` (the command line).
 */
import { createHash } from 'node:crypto';
import { join } from 'node:path';
import { configToYaml } from '../config/writeYaml.ts';
import type { RunConfig } from '../config/runConfig.ts';
import { writeFileDurable } from './durableFile.ts';

export const CONFIG_FILE = 'config.yaml';
export const COMMAND_FILE = 'command.txt';

/** A hash of the model alone: resume refuses a config whose model differs from the saved one. */
export function modelHash(config: RunConfig): string {
  return createHash('sha256').update(JSON.stringify(config.model)).digest('hex').slice(0, 16);
}

/** Writes config.yaml and command.txt into the run directory. */
export function writeRunConfig(runDir: string, config: RunConfig, argv: readonly string[] = process.argv): void {
  writeFileDurable(join(runDir, CONFIG_FILE), configToYaml(config));
  const quote = (a: string) => (/^[\w@%+=:,./-]+$/.test(a) ? a : `'${a.replaceAll("'", "'\\''")}'`);
  writeFileDurable(join(runDir, COMMAND_FILE), `${argv.map(quote).join(' ')}\n`);
}
