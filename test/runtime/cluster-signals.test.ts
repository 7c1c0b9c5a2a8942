/**
 * Graceful stops of jobs started by the engines clusters use (docs/recovery.md, "Stopping a job"):
 * - mpirun (Open MPI 4.1) turns a SIGTERM/SIGINT to itself into SIGCONT to the ranks, then SIGTERM
 *   after `odls_base_sigkill_timeout` seconds, then SIGKILL as long again: with the timeout raised
 *   the ranks stop at one agreed step, write the checkpoint and say how to resume;
 * - mpirun forwards SIGUSR1 to every rank at once: the same stop, exit code 138;
 * - Slurm sends SIGTERM to every task (scancel, preemption, the time limit); started by hand with
 *   Slurm's variables, both processes stop at one step and exit 143.
 * The mpirun tests are skipped, with the reason, where mpirun is absent.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { cliArgs, REPO, tmpDir } from '../cli/helpers.ts';
import { randomPort, SECRET, tinyJobConfig } from './jobHelpers.ts';
import { readCheckpoint } from '../../src/runtime/checkpoint/checkpoint.ts';
import { mpiAddonPath } from '../../src/comm/mpi/index.ts';

const noMpirun =
  spawnSync('mpirun', ['--version']).status !== 0 ? 'mpirun not found (apt-get install openmpi-bin)' : false;
const NODE = [process.execPath, ...cliArgs()];

/** `out`: stdout and stderr as they came (chunks of the two interleave mid-line); `stdout` alone, whole lines */
interface Ended {
  code: number | null;
  out: string;
  stdout: string;
}

/** Starts `cmd`; once the run's metrics hold a step, `signal(child)`; resolves when it has exited. */
function runAndStop(
  cmd: string,
  args: string[],
  env: NodeJS.ProcessEnv,
  runDir: string,
  signal: (pid: number) => void,
): Promise<Ended> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, {
      cwd: REPO,
      env: { ...process.env, PARATRAIN_OFFLINE: '1', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '',
      stdout = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => {
      out += d;
      stdout += d;
    });
    child.stderr.setEncoding('utf8').on('data', (d: string) => {
      out += d;
    });
    const metrics = join(runDir, 'metrics.jsonl');
    const poll = setInterval(() => {
      if (!existsSync(metrics) || !readFileSync(metrics, 'utf8').includes('"type":"step"')) return;
      clearInterval(poll);
      signal(child.pid!);
    }, 20);
    const killer = setTimeout(() => child.kill('SIGKILL'), 90_000);
    child.on('error', reject);
    child.on('close', (code) => {
      clearInterval(poll);
      clearTimeout(killer);
      resolve({ code, out, stdout });
    });
  });
}

/** The tiny job for 400 epochs of 6 steps, one device per process: far longer than a test waits. */
function longJob(dir: string): string {
  const file = tinyJobConfig(dir, ', devices: 1, strategy: hybrid');
  writeFileSync(file, readFileSync(file, 'utf8').replace('epochs: 1,', 'epochs: 400,'));
  return file;
}

/** Process 0 recorded the stop, wrote the checkpoint of that step and printed the resume line; process 1 stopped after as many steps. */
function checkAgreedStop(r: Ended, runDir: string, signal: string): void {
  const events = readFileSync(join(runDir, 'metrics.jsonl'), 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as Record<string, unknown>);
  const stopped = events.find((e) => e.type === 'stopped');
  assert.ok(stopped, `a 'stopped' event in metrics.jsonl\n${r.out}`);
  assert.equal(stopped.signal, signal);
  const step = stopped.step as number;
  assert.ok(step > 0 && step < 2400, `stopped mid-run (${step})`);
  const set = join(runDir, 'checkpoints', `step-${String(step).padStart(8, '0')}`);
  const hint = `paratrain: stopped by ${signal} at step ${step} (epoch ${(stopped.epoch as number) + 1}); the newest checkpoint set is ${set} (step ${step}); resume with: paratrain train --resume ${runDir}`;
  assert.ok(r.out.includes(hint), `expected the line\n${hint}\nin\n${r.out}`);
  assert.equal(
    readCheckpoint(join(runDir, 'model.safetensors')).metadata.step,
    String(step),
    'the checkpoint is of the step the run stopped at',
  );
  const rank1 = r.stdout
    .split('\n')
    .map((l) => l.trim())
    .find((l) => l.startsWith('{"rank":1'));
  assert.ok(rank1, `process 1's summary line\n${r.out}`);
  assert.equal(JSON.parse(rank1).stopped?.step, step, 'process 1 stopped after the same steps');
}

function mpirunArgs(extra: string[], args: string[]): string[] {
  const asRoot = process.getuid?.() === 0 ? ['--allow-run-as-root'] : [];
  return [
    ...asRoot,
    '--oversubscribe',
    '--bind-to',
    'none',
    ...extra,
    '-x',
    'PARATRAIN_SECRET',
    '-x',
    'MASTER_PORT',
    '-x',
    'PARATRAIN_OFFLINE',
    '-np',
    '2',
    ...NODE,
    ...args,
  ];
}

test('SIGTERM to mpirun with odls_base_sigkill_timeout raised: both ranks stop at one step, checkpoint, resume line', {
  skip: noMpirun,
  timeout: 120_000,
}, async () => {
  const dir = tmpDir('paratrain-mpirun-stop-'),
    out = join(dir, 'run');
  // the ranks get SIGTERM 3 s after mpirun does, and SIGKILL 3 s after that; meanwhile they train on,
  // 4× slower (asleep, not computing: the machine is shared)
  const slow = ['--slow-device', '0:4', '--slow-device', '1:4'];
  const r = await runAndStop(
    'mpirun',
    mpirunArgs(['--mca', 'odls_base_sigkill_timeout', '3'], ['train', longJob(dir), '--out', out, ...slow]),
    { PARATRAIN_SECRET: SECRET, MASTER_PORT: String(randomPort()) },
    out,
    (pid) => process.kill(pid, 'SIGTERM'),
  );
  checkAgreedStop(r, out, 'SIGTERM');
});

// with MPI's collectives where the addon is built (the stop's agreement still goes over TCP)
const transport = mpiAddonPath() ? 'mpi' : 'tcp';

test(`SIGUSR1 to mpirun reaches every rank at once: the same stop, exit 138 (--transport ${transport})`, {
  skip: noMpirun,
  timeout: 120_000,
}, async () => {
  const dir = tmpDir('paratrain-mpirun-stop-'),
    out = join(dir, 'run');
  const r = await runAndStop(
    'mpirun',
    mpirunArgs([], ['train', longJob(dir), '--out', out, '--transport', transport]),
    { PARATRAIN_SECRET: SECRET, MASTER_PORT: String(randomPort()) },
    out,
    (pid) => process.kill(pid, 'SIGUSR1'),
  );
  assert.equal(r.code, 138, r.out);
  checkAgreedStop(r, out, 'SIGUSR1');
});

test("srun: Slurm's SIGTERM to every task stops both processes at one step; each exits 143", {
  timeout: 120_000,
}, async () => {
  const dir = tmpDir('paratrain-slurm-stop-'),
    out = join(dir, 'run'),
    cfg = longJob(dir);
  const slurm = (rank: number) => ({
    SLURM_PROCID: String(rank),
    SLURM_NTASKS: '2',
    SLURM_LOCALID: String(rank),
    SLURM_JOB_NODELIST: 'localhost',
    MASTER_PORT: String(port),
    PARATRAIN_SECRET: SECRET,
  });
  const port = randomPort();
  const pids: number[] = [];
  // Slurm signals every task together: each process is sent SIGTERM once both are training
  const signalAll = (pid: number) => {
    pids.push(pid);
    if (pids.length === 2) for (const p of pids) process.kill(p, 'SIGTERM');
  };
  const [r0, r1] = await Promise.all(
    [0, 1].map((rank) =>
      runAndStop(process.execPath, [...cliArgs(), 'train', cfg, '--out', out], slurm(rank), out, signalAll),
    ),
  );
  assert.equal(r0!.code, 143, r0!.out);
  assert.equal(r1!.code, 143, r1!.out);
  checkAgreedStop({ code: r0!.code, out: r0!.out + r1!.out, stdout: r0!.stdout + r1!.stdout }, out, 'SIGTERM');
});
