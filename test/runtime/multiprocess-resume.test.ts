/**
 * Checkpoint sets and resume for jobs of several processes (`paratrain launch`, 2 processes × 1
 * device, loopback TCP), and the launcher's restart (the uninterrupted job each is compared with is
 * the same 2-process job run in this process: trainHere):
 *   - sync (the parameter server in process 0, its state saved through the remote snapshot),
 *     stopped at step 13 by a failing device in process 1 and resumed with
 *     `launch … -- train --resume DIR` ends bit-identical to the uninterrupted job;
 *   - hybrid: `launch --max-restarts 1` with process 1 SIGKILLed once the first checkpoint set exists
 *     restarts the job with --resume (--force kept: the first attempt's metrics are appended to,
 *     not truncated), exits 0 and ends bit-identical to the unkilled job, each set holding both
 *     processes' device files.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, execFileSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { cliArgs, REPO, runCli, tmpDir } from '../cli/helpers.ts';
import { randomPort, trainHere } from './jobHelpers.ts';
import { assertSameTensors, tensorsOf, writeResumeConfig } from './resumeHelpers.ts';
import { readMetrics } from '../../src/runtime/events/metrics.ts';

const launch = (args: string[], env: Record<string, string> = {}) =>
  runCli(['launch', '--nproc-per-node', '2', '--master-port', String(randomPort()), ...args], {
    timeoutMs: 150_000,
    env,
  });

test('sync on 2 processes × 1 device: stopped at step 13 and resumed with launch … --resume equals the uninterrupted job, bit for bit', {
  timeout: 300_000,
}, async () => {
  const dir = tmpDir();
  const cfg = writeResumeConfig(dir, { trainLimit: 160 });
  await trainHere(cfg, join(dir, 'whole'), { processes: 2, strategy: 'sync' });
  const run = join(dir, 'run');
  const failed = await launch(['--', 'train', cfg, '--strategy', 'sync', '--out', run, '--quiet'], {
    PARATRAIN_FAIL_AT: '1:13',
  });
  assert.notEqual(failed.code, 0);
  assert.match(failed.stderr, /device 1 \(process 1\) failed: injected failure at step 13/);
  // process 1 wrote its device's file into the set: both devices' state is there, and the server's
  const set = join(run, 'checkpoints', 'step-00000010');
  assert.deepEqual(deviceFiles(set), ['device-0.safetensors', 'device-1.safetensors']);
  assert.ok(existsSync(join(set, 'server.safetensors')), 'the server in process 0 is saved');
  const resumed = await launch(['--', 'train', '--resume', run, '--quiet']);
  assert.equal(resumed.code, 0, resumed.stderr);
  assertSameTensors(tensorsOf(join(dir, 'whole', 'model.safetensors')), tensorsOf(join(run, 'model.safetensors')));
  assert.ok(readMetrics(join(run, 'metrics.jsonl')).some((e) => e.type === 'resume' && e.step === 10));
});

/** The device files of a checkpoint set, sorted. */
const deviceFiles = (set: string) =>
  readdirSync(set)
    .filter((n) => n.startsWith('device-'))
    .sort();

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The pid of the launcher's child that is process `rank` (its RANK variable), or undefined. */
function childOfRank(launcherPid: number, rank: number): number | undefined {
  let listed = '';
  try {
    listed = execFileSync('ps', ['-o', 'pid=', '--ppid', String(launcherPid)], { encoding: 'utf8' });
  } catch {
    return undefined;
  }
  for (const pid of listed
    .split('\n')
    .map((l) => Number(l.trim()))
    .filter((p) => p > 0)) {
    try {
      if (readFileSync(`/proc/${pid}/environ`, 'utf8').split('\0').includes(`RANK=${rank}`)) return pid;
    } catch {
      /* gone */
    }
  }
  return undefined;
}

test('launch --max-restarts 1: process 1 SIGKILLed after the first checkpoint set; the job restarts, exits 0 and equals the unkilled job, bit for bit', {
  timeout: 300_000,
}, async () => {
  const dir = tmpDir();
  // 480 samples: 30 steps an epoch, long enough to kill mid-run
  const cfg = writeResumeConfig(dir, { trainLimit: 480 });
  await trainHere(cfg, join(dir, 'whole'), { processes: 2 });
  const run = join(dir, 'run');
  let stderr = '';
  // device 1 a 4× straggler (timing only, the maths unchanged): the kill lands mid-run even when this process is slow to see the set
  const launcher = spawn(
    process.execPath,
    [
      ...cliArgs(),
      'launch',
      '--nproc-per-node',
      '2',
      '--master-port',
      String(randomPort()),
      '--max-restarts',
      '1',
      '--',
      'train',
      cfg,
      '--out',
      run,
      '--force',
      '--quiet',
      '--slow-device',
      '1:4',
    ],
    { cwd: REPO, env: { ...process.env, PARATRAIN_OFFLINE: '1' }, stdio: ['ignore', 'ignore', 'pipe'] },
  );
  launcher.stderr.on('data', (d: Buffer) => {
    stderr += d.toString();
  });
  const exited = new Promise<number | null>((resolve) => launcher.on('exit', (code) => resolve(code)));
  // the first complete set (step 5), then a real kill of process 1 while the job trains on
  const sets = join(run, 'checkpoints');
  const deadline = Date.now() + 120_000;
  while (!(existsSync(sets) && readdirSync(sets).some((n) => /^step-\d+$/.test(n)))) {
    assert.ok(Date.now() < deadline, 'the first checkpoint set appears');
    await sleep(50);
  }
  const victim = childOfRank(launcher.pid!, 1);
  assert.ok(victim, 'process 1 is a child of the launcher');
  process.kill(victim, 'SIGKILL');
  const code = await exited;
  assert.equal(code, 0, stderr);
  assert.match(
    stderr,
    /process 1 died \(signal SIGKILL\); restarting the job from its last checkpoint \(restart 1 of 1\)/,
  );
  assertSameTensors(tensorsOf(join(dir, 'whole', 'model.safetensors')), tensorsOf(join(run, 'model.safetensors')));
  // --force on the restart did not truncate: both attempts' starts and the resume are in metrics.jsonl
  const events = readMetrics(join(run, 'metrics.jsonl'));
  assert.equal(events.filter((e) => e.type === 'start').length, 2);
  assert.ok(events.some((e) => e.type === 'resume'));
  // hybrid: process 1 wrote its device's file into each set, so both devices' state is there
  const last = readdirSync(sets)
    .filter((n) => /^step-\d+$/.test(n))
    .sort()
    .at(-1)!;
  assert.deepEqual(deviceFiles(join(sets, last)), ['device-0.safetensors', 'device-1.safetensors']);
});
