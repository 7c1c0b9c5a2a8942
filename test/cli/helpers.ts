import { spawn } from 'node:child_process';
import { MAIN, REPO } from '../report/helpers.ts';

export { REPO, MAIN, SUBSET, tmpDir, writeTinyConfig, writeSyntheticRun } from '../report/helpers.ts';

export interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs `node --import tsx src/cli/main.ts ...args` from the repository root (no TTY). */
export function runCli(
  args: string[],
  opts: { cwd?: string; timeoutMs?: number; env?: Record<string, string> } = {},
): Promise<CliResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', 'tsx', MAIN, ...args], {
      cwd: opts.cwd ?? REPO,
      env: { ...process.env, PARATRAIN_OFFLINE: '1', FORCE_COLOR: '0', ...opts.env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '',
      stderr = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => {
      stdout += d;
    });
    child.stderr.setEncoding('utf8').on('data', (d: string) => {
      stderr += d;
    });
    const timer = setTimeout(() => child.kill('SIGKILL'), opts.timeoutMs ?? 60_000);
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

/** Node's own warnings (e.g. "devices will share cores") are not the command's output. */
export function stderrLines(r: CliResult): string[] {
  return r.stderr
    .split('\n')
    .filter((l) => l !== '' && !/^\(node:\d+\) Warning:|^\(Use `node --trace-warnings/.test(l));
}
