import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createInterface } from 'node:readline';

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
  /** where prefixed output of ranks other than 0 goes */
  out?: NodeJS.WritableStream;
  err?: NodeJS.WritableStream;
}

/**
 * `paratrain launch`: starts nprocPerNode paratrain processes on this host with the torchrun-style
 * environment (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT) and a
 * shared secret, and waits for them. Rank 0 keeps the terminal (its progress bar); the others'
 * lines are prefixed with their process index (`[process 1]`, the RANK it was given; see deviceNames.ts). When a process fails, the others are given graceMs to stop
 * by themselves (they are told through the job's abort) and are then terminated. Resolves to the
 * exit code: 0, or the first failing process's code.
 */
export async function launch(o: LaunchOptions): Promise<number> {
  const base = o.env ?? process.env;
  const env: NodeJS.ProcessEnv = { ...base };
  if (!base.PARATRAIN_SECRET && !base.PARATRAIN_SECRET_FILE) {
    if (o.nnodes > 1) {
      throw new Error('launch: a job on several hosts needs a shared secret: set PARATRAIN_SECRET (the same value on every host) ' +
        'or PARATRAIN_SECRET_FILE (a file only the job can read), e.g. PARATRAIN_SECRET=$(openssl rand -hex 32)');
    }
    // one host: a fresh secret that only these processes know
    env.PARATRAIN_SECRET = randomBytes(32).toString('hex');
  }
  const worldSize = o.nprocPerNode * o.nnodes;
  const children: ChildProcess[] = [];
  let firstFailure: { rank: number; code: number } | null = null;
  let killTimer: NodeJS.Timeout | undefined;
  const stopOthers = () => {
    if (killTimer) return;
    killTimer = setTimeout(() => { for (const c of children) if (c.exitCode === null) c.kill('SIGTERM'); }, o.graceMs ?? 10_000);
  };
  const forward = (signal: NodeJS.Signals) => () => { for (const c of children) if (c.exitCode === null) c.kill(signal); };
  const onInt = forward('SIGINT'), onTerm = forward('SIGTERM');
  process.on('SIGINT', onInt);
  process.on('SIGTERM', onTerm);
  try {
    const exits = Array.from({ length: o.nprocPerNode }, (_, local) => {
      const rank = o.nodeRank * o.nprocPerNode + local;
      const child = spawn(process.execPath, [...process.execArgv, process.argv[1]!, ...o.args], {
        env: {
          ...env, RANK: String(rank), WORLD_SIZE: String(worldSize), LOCAL_RANK: String(local),
          LOCAL_WORLD_SIZE: String(o.nprocPerNode), MASTER_ADDR: o.masterAddr, MASTER_PORT: String(o.masterPort),
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
          firstFailure ??= { rank, code: 1 };
          stopOthers();
          resolve();
        });
        child.on('exit', (code, signal) => {
          const failed = code !== 0;
          if (failed && !firstFailure) {
            firstFailure = { rank, code: code ?? 1 };
            if (signal) (o.err ?? process.stderr).write(`paratrain launch: process ${rank} was killed by ${signal}\n`);
          }
          if (failed) stopOthers();
          resolve();
        });
      });
    });
    await Promise.all(exits);
  } finally {
    clearTimeout(killTimer);
    process.off('SIGINT', onInt);
    process.off('SIGTERM', onTerm);
  }
  const failure = firstFailure as { rank: number; code: number } | null;
  return failure ? failure.code : 0;
}

function prefixLines(from: NodeJS.ReadableStream, to: NodeJS.WritableStream, prefix: string): void {
  createInterface({ input: from, crlfDelay: Infinity }).on('line', (line) => to.write(`${prefix}${line}\n`));
}
