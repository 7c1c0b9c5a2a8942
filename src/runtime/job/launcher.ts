import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { constants as osConstants } from 'node:os';
import { createInterface } from 'node:readline';
import { LAUNCHER_PID_VAR } from './parentWatch.ts';

export interface LaunchOptions {
  /** processes to start on this host */
  nprocPerNode: number;
  /** hosts in the job (each runs this launcher once) */
  nnodes: number;
  /** this host's index, 0 … nnodes − 1; node 0 holds rank 0 and the rendezvous */
  nodeRank: number;
  masterAddr: string;
  masterPort: number;
  /** the paratrain arguments every process runs, e.g. ['train', 'examples/mnist-small.yaml'] */
  args: string[];
  /** environment to start from (default process.env) */
  env?: NodeJS.ProcessEnv;
  /** after the first process fails, how long the others get to stop by themselves, ms */
  graceMs?: number;
  /** how long a process the launcher sent SIGTERM (or a second signal) has before SIGKILL, ms (default 10 000) */
  killGraceMs?: number;
  /** after a process died of a forwarded signal (it was still starting), how long the others get to end by themselves, ms */
  startingGraceMs?: number;
  /** the program and leading arguments each process runs (default: this node and paratrain's entry); tests use a stub */
  command?: string[];
  /** where prefixed output of ranks other than 0 goes */
  out?: NodeJS.WritableStream;
  err?: NodeJS.WritableStream;
}

/** How one attempt of a job ended. */
export interface JobOutcome {
  /** 0, or the first failing process's exit code (128 + n when killed by signal n) */
  code: number;
  /**
   * the process whose failure ended the job, with its exit code or the signal that killed it: one
   * killed by a signal the launcher did not send (the cause: its peers then exit with an error
   * saying it died, possibly before its own exit is seen), else the first that failed
   */
  failure: { rank: number; code: number | null; signal: NodeJS.Signals | null } | null;
  /** the launcher itself was sent SIGINT/SIGTERM/SIGUSR1 (forwarded to every process) */
  interrupted: NodeJS.Signals | null;
}

/** `paratrain launch` (one attempt, see launchJob): the job's exit code. */
export async function launch(o: LaunchOptions): Promise<number> {
  return (await launchJob(o)).code;
}

/**
 * `paratrain launch`: starts nprocPerNode paratrain processes on this host with the torchrun-style
 * environment (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT) and a
 * shared secret, and waits for them. Rank 0 keeps the terminal (its progress bar); the others'
 * lines are prefixed with their process index (`[process 1]`, the RANK it was given; see deviceNames.ts). When a process fails, the others are given graceMs to stop
 * by themselves (they are told through the job's abort) and are then terminated (SIGTERM, then
 * SIGKILL after killGraceMs: a stopped or deaf process does not hold the launcher). A SIGINT,
 * SIGTERM or SIGUSR1 to the launcher is forwarded once to every process (each in its own process group, so a
 * terminal's Ctrl-C reaches them only through the launcher); a second one is forwarded too and
 * followed by SIGKILL after killGraceMs. A process that the forwarded signal kills had no handler
 * yet: it was still starting, so the job never formed and the others, waiting for it at the
 * rendezvous, cannot stop at an agreed step: unless they end within startingGraceMs, the launcher
 * says so and SIGKILLs them (nothing was trained that a checkpoint could keep). The processes watch
 * the launcher (PARATRAIN_LAUNCHER_PID, parentWatch.ts) and stop when it is gone, even SIGKILLed.
 */
export async function launchJob(o: LaunchOptions): Promise<JobOutcome> {
  const base = o.env ?? process.env;
  const env: NodeJS.ProcessEnv = { ...base };
  if (!base.PARATRAIN_SECRET && !base.PARATRAIN_SECRET_FILE) {
    if (o.nnodes > 1) {
      throw new Error(
        'launch: a job on several hosts needs a shared secret: set PARATRAIN_SECRET (the same value on every host) ' +
          'or PARATRAIN_SECRET_FILE (a file only the job can read), e.g. PARATRAIN_SECRET=$(openssl rand -hex 32)',
      );
    }
    // one host: a fresh secret that only these processes know
    env.PARATRAIN_SECRET = randomBytes(32).toString('hex');
  }
  const worldSize = o.nprocPerNode * o.nnodes;
  const children: ChildProcess[] = [];
  /** failures in the order seen; `external`: killed by a signal the launcher did not send */
  const failures: (NonNullable<JobOutcome['failure']> & { external: boolean })[] = [];
  const signalled = new Set<ChildProcess>();
  let interrupted: NodeJS.Signals | null = null;
  let killTimer: NodeJS.Timeout | undefined;
  const timers: NodeJS.Timeout[] = [];
  const alive = () => children.filter((c) => c.exitCode === null && c.signalCode === null);
  const signal = (c: ChildProcess, s: NodeJS.Signals) => {
    signalled.add(c);
    c.kill(s);
  };
  const killLater = () =>
    timers.push(
      setTimeout(() => {
        for (const c of alive()) signal(c, 'SIGKILL');
      }, o.killGraceMs ?? 10_000),
    );
  const stopOthers = () => {
    if (killTimer) return;
    killTimer = setTimeout(() => {
      for (const c of alive()) signal(c, 'SIGTERM');
      killLater();
    }, o.graceMs ?? 10_000);
  };
  let starting: NodeJS.Timeout | undefined;
  /** process `rank` died of the forwarded signal before it could handle it: the others wait for it in vain */
  const stopWithoutIt = (rank: number, s: NodeJS.Signals) => {
    if (starting) return;
    starting = setTimeout(() => {
      const rest = alive();
      if (rest.length === 0) return;
      (o.err ?? process.stderr).write(
        `paratrain launch: process ${rank} ended on ${s} while still starting, before the job formed: the others cannot ` +
          'stop at an agreed step without it, and there is no step to checkpoint; stopping the other processes now\n',
      );
      for (const c of rest) signal(c, 'SIGKILL');
    }, o.startingGraceMs ?? 1000);
  };
  const forward = (s: NodeJS.Signals) => () => {
    if (interrupted) killLater();
    interrupted ??= s;
    for (const c of alive()) signal(c, s);
  };
  const forwarded = (['SIGINT', 'SIGTERM', 'SIGUSR1'] as const).map((s) => [s, forward(s)] as const);
  for (const [s, handler] of forwarded) process.on(s, handler);
  try {
    const exits = Array.from({ length: o.nprocPerNode }, (_, local) => {
      const rank = o.nodeRank * o.nprocPerNode + local;
      const [program, ...lead] = o.command ?? [process.execPath, ...process.execArgv, process.argv[1]!];
      const child = spawn(program!, [...lead, ...o.args], {
        // its own process group: a terminal's Ctrl-C reaches it once, forwarded by the launcher
        detached: true,
        env: {
          ...env,
          [LAUNCHER_PID_VAR]: String(process.pid),
          RANK: String(rank),
          WORLD_SIZE: String(worldSize),
          LOCAL_RANK: String(local),
          LOCAL_WORLD_SIZE: String(o.nprocPerNode),
          MASTER_ADDR: o.masterAddr,
          MASTER_PORT: String(o.masterPort),
        },
        stdio: rank === 0 ? 'inherit' : ['ignore', 'pipe', 'pipe'],
      });
      children.push(child);
      if (rank !== 0) {
        prefixLines(child.stdout!, o.out ?? process.stdout, `[process ${rank}] `);
        prefixLines(child.stderr!, o.err ?? process.stderr, `[process ${rank}] `);
      }
      return new Promise<void>((resolve) => {
        child.on('error', (err) => {
          (o.err ?? process.stderr).write(`paratrain launch: process ${rank} could not start: ${err.message}\n`);
          failures.push({ rank, code: 1, signal: null, external: false });
          stopOthers();
          resolve();
        });
        child.on('exit', (code, killedBy) => {
          const failed = code !== 0;
          if (failed) {
            const external = killedBy !== null && !signalled.has(child);
            failures.push({ rank, code, signal: killedBy, external });
            if (external)
              (o.err ?? process.stderr).write(`paratrain launch: process ${rank} was killed by ${killedBy}\n`);
            if (killedBy !== null && killedBy === interrupted && !external) stopWithoutIt(rank, killedBy);
            else stopOthers();
          }
          resolve();
        });
      });
    });
    await Promise.all(exits);
  } finally {
    clearTimeout(killTimer);
    clearTimeout(starting);
    for (const t of timers) clearTimeout(t);
    for (const [s, handler] of forwarded) process.off(s, handler);
  }
  const cause = failures.find((f) => f.external) ?? failures[0];
  const failure: JobOutcome['failure'] = cause ? { rank: cause.rank, code: cause.code, signal: cause.signal } : null;
  const code = !failure ? 0 : (failure.code ?? 128 + (signalNumber(failure.signal) ?? 1));
  return { code, failure, interrupted };
}

function signalNumber(signal: NodeJS.Signals | null): number | undefined {
  return signal ? osConstants.signals[signal] : undefined;
}

function prefixLines(from: NodeJS.ReadableStream, to: NodeJS.WritableStream, prefix: string): void {
  createInterface({ input: from, crlfDelay: Infinity }).on('line', (line) => to.write(`${prefix}${line}\n`));
}
