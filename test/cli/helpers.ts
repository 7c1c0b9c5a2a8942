import { spawn } from 'node:child_process';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { bundledModule } from '../../src/runtime/job/spawnWorker.ts';
import { MAIN, REPO } from '../report/helpers.ts';

export { REPO, MAIN, SUBSET, tmpDir, writeTinyConfig, writeSyntheticRun } from '../report/helpers.ts';

export interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Node's arguments that run the CLI from its TypeScript sources through tsx (runCli's `tsx` option, cliArgs' fallback). */
export const TSX_CLI: readonly string[] = ['--import', 'tsx', MAIN];

/**
 * Node's arguments that run the CLI in tests: one esbuild bundle of src/cli/main.ts per test process
 * (spawnWorker.ts's bundledModule: each file keeps its own import.meta.url, so paths beside the
 * sources, worker threads and `launch`'s re-runs behave as under tsx), which starts about a CPU-second
 * sooner than loading tsx. With PARATRAIN_WORKER_BUNDLE=0, or should bundling fail: TSX_CLI.
 */
export function cliArgs(): string[] {
  const bundle = bundledModule(pathToFileURL(MAIN).href);
  return bundle ? ['--enable-source-maps', fileURLToPath(bundle)] : [...TSX_CLI];
}

/** Runs the CLI (cliArgs(), or with `tsx` TSX_CLI) with ...args from the repository root (no TTY). */
export function runCli(
  args: string[],
  opts: { cwd?: string; timeoutMs?: number; env?: Record<string, string>; tsx?: boolean } = {},
): Promise<CliResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [...(opts.tsx ? TSX_CLI : cliArgs()), ...args], {
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
