/**
 * The start of a job of several processes: a process started without the job's secret (mpirun or
 * a torchrun-style environment with PARATRAIN_SECRET not exported) is refused before its run
 * directory exists, so the same command with the secret is not refused for the files of the
 * failed one; and one SIGINT to `paratrain launch` while a process is still starting (it dies of
 * the signal before it can handle it, so the job never forms) stops the job within moments, with
 * a line that says what happened, not a "second SIGTERM" nobody sent.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { cliArgs, REPO, runCli, stderrLines, tmpDir } from '../cli/helpers.ts';
import { randomPort, runCommand, tinyJobConfig } from './jobHelpers.ts';

const noMpirun = spawnSync('mpirun', ['--version']).status !== 0 && 'mpirun not found (apt-get install openmpi-bin)';

test('a process of a 2-process job without the shared secret is refused before its run directory is made', {
  timeout: 60_000,
}, async () => {
  const dir = tmpDir('paratrain-start-');
  const out = join(dir, 'run');
  const r = await runCli(['train', tinyJobConfig(dir), '--out', out], {
    env: {
      RANK: '0',
      WORLD_SIZE: '2',
      MASTER_ADDR: '127.0.0.1',
      MASTER_PORT: String(randomPort()),
      PARATRAIN_SECRET: '',
      PARATRAIN_SECRET_FILE: '',
    },
    timeoutMs: 50_000,
  });
  assert.equal(r.code, 1, r.stderr);
  assert.match(
    stderrLines(r).join('\n'),
    /^paratrain: a world of 2 ranks needs a shared secret .*set PARATRAIN_SECRET/m,
    r.stderr,
  );
  assert.ok(!existsSync(out), `nothing was written: ${out} does not exist`);
});

test('mpirun -np 2 without the secret exported: both processes refused, no run directory', {
  skip: noMpirun,
  timeout: 60_000,
}, async () => {
  const dir = tmpDir('paratrain-start-');
  const out = join(dir, 'run');
  const asRoot = process.getuid?.() === 0 ? ['--allow-run-as-root'] : [];
  const env: NodeJS.ProcessEnv = { ...process.env, PARATRAIN_OFFLINE: '1', MASTER_PORT: String(randomPort()) };
  delete env.PARATRAIN_SECRET;
  delete env.PARATRAIN_SECRET_FILE;
  const r = await runCommand(
    'mpirun',
    [
      ...asRoot,
      '--oversubscribe',
      '--bind-to',
      'none',
      '-x',
      'MASTER_PORT',
      '-np',
      '2',
      process.execPath,
      ...cliArgs(),
      'train',
      tinyJobConfig(dir),
      '--out',
      out,
    ],
    { env, timeoutMs: 50_000 },
  );
  assert.notEqual(r.code, 0, r.out);
  assert.match(r.out, /^paratrain: a world of 2 ranks needs a shared secret/m, r.out);
  assert.ok(!existsSync(out), `nothing was written: ${out} does not exist`);
});

test('one SIGINT to launch while process 1 is still starting stops the job within moments, saying why', {
  timeout: 60_000,
}, async () => {
  const dir = tmpDir('paratrain-start-');
  // process 1 starts slowly, without signal handlers yet, as on a loaded host: SIGINT ends it at once
  const slowStart = join(dir, 'slow-start.mjs');
  writeFileSync(
    slowStart,
    "if (process.env.RANK === '1') Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 15000);\n",
  );
  const child = spawn(
    process.execPath,
    [
      ...cliArgs(),
      'launch',
      '--nproc-per-node',
      '2',
      '--master-port',
      String(randomPort()),
      '--',
      'train',
      tinyJobConfig(dir),
      '--out',
      join(dir, 'run'),
    ],
    {
      cwd: REPO,
      env: { ...process.env, PARATRAIN_OFFLINE: '1', NODE_OPTIONS: `--import=${slowStart}` },
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  let stderr = '',
    sentAt = 0;
  child.stderr.setEncoding('utf8').on('data', (d: string) => {
    stderr += d;
    // process 0 is in train(), waiting at the rendezvous for process 1
    if (!sentAt && /parameters, backend/.test(stderr)) {
      sentAt = performance.now();
      child.kill('SIGINT');
    }
  });
  child.stdout.resume();
  const killer = setTimeout(() => child.kill('SIGKILL'), 50_000);
  const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
  clearTimeout(killer);
  const ms = performance.now() - sentAt;
  assert.ok(sentAt > 0, `process 0 never started training\n${stderr}`);
  assert.equal(code, 130, stderr);
  assert.ok(ms < 4000, `stopped ${ms.toFixed(0)} ms after the SIGINT\n${stderr}`);
  assert.doesNotMatch(stderr, /second SIG/, 'one signal was sent');
  assert.match(
    stderr,
    /^paratrain launch: process 1 ended on SIGINT while still starting, before the job formed: .*stopping the other processes now/m,
  );
});
