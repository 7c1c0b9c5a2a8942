import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { launchJob, type LaunchOptions } from './launcher.ts';
import { timestampName } from '../files/runDir.ts';

/** Exit codes of a process that stopped gracefully on SIGINT/SIGTERM/SIGUSR1: a stop, not a death. */
const STOP_CODES = new Set([130, 143, 138]);
/** Each restart's rendezvous moves this many ports up, clear of the last attempt's sockets. */
export const RESTART_PORT_STRIDE = 64;

export interface RestartOptions extends LaunchOptions {
  /** restarts of the whole job allowed after a process dies (0: none) */
  maxRestarts: number;
}

/**
 * `paratrain launch --max-restarts N` (torchrun's rule): when a process of the job dies, every
 * process is stopped and the whole job started again from its last checkpoint — the same
 * arguments with `--out RUN_DIR` replaced by `--resume RUN_DIR`, on fresh ports — at most N
 * times. So that the run directory is known, a job without `--out` is given `--out runs/<timestamp>`.
 * A job stopped on purpose (SIGINT/SIGTERM/SIGUSR1 to the launcher, or processes exiting 130/143/138) is not
 * restarted. Resolves to the exit code of the last attempt. One host only (--nnodes 1): restarting
 * a job on several hosts needs their launchers to agree, which they cannot yet.
 */
export async function launchWithRestarts(o: RestartOptions): Promise<number> {
  if (o.maxRestarts === 0) return (await launchJob(o)).code;
  if (o.nnodes > 1) {
    throw new Error(
      `--max-restarts: restarting a job is supported on one host only (--nnodes 1, here ${o.nnodes}); run without --max-restarts`,
    );
  }
  const { args, runDir } = withRunDir(o.args);
  const err = o.err ?? process.stderr;
  for (let restart = 0; ; restart++) {
    const attempt = await launchJob({
      ...o,
      args: restart === 0 ? args : resumeArgs(args, runDir),
      masterPort: o.masterPort + restart * RESTART_PORT_STRIDE,
    });
    const { failure } = attempt;
    if (
      !failure ||
      attempt.interrupted ||
      (failure.code !== null && STOP_CODES.has(failure.code)) ||
      restart >= o.maxRestarts
    )
      return attempt.code;
    const why = failure.signal ? `signal ${failure.signal}` : `exit code ${failure.code}`;
    err.write(
      `paratrain launch: process ${failure.rank} died (${why}); restarting the job from its last checkpoint (restart ${restart + 1} of ${o.maxRestarts})\n`,
    );
  }
}

/** The value of `--out` in a paratrain train command line, if any. */
export function outOf(args: readonly string[]): string | undefined {
  for (let i = 0; i < args.length; i++) {
    if (args[i] === '--out') return args[i + 1];
    if (args[i]!.startsWith('--out=')) return args[i]!.slice('--out='.length);
  }
  return undefined;
}

/** The arguments with an explicit --out (runs/<timestamp> when the user gave none) and that directory. */
export function withRunDir(args: readonly string[]): { args: string[]; runDir: string } {
  const given = outOf(args);
  if (given !== undefined) return { args: [...args], runDir: given };
  const runDir = join('runs', `${timestampName()}-${randomBytes(2).toString('hex')}`);
  return { args: [...args, '--out', runDir], runDir };
}

/** A restart's arguments: --out RUN_DIR replaced by --resume RUN_DIR. */
export function resumeArgs(args: readonly string[], runDir: string): string[] {
  const rest: string[] = [];
  for (let i = 0; i < args.length; i++) {
    if (args[i] === '--out') {
      i++;
      continue;
    }
    if (args[i]!.startsWith('--out=')) continue;
    rest.push(args[i]!);
  }
  return [...rest, '--resume', runDir];
}
