/**
 * A process of an async job killed mid-run (kill -9): its devices' links to the parameter server
 * close, the server drops them and process 0 finishes the run with those that remain (exit 0,
 * checkpoint, the losses in metrics.jsonl).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { cliArgs, REPO, runCli, stderrLines, tmpDir } from '../cli/helpers.ts';
import { randomPort, SECRET, tinyJobConfig } from './jobHelpers.ts';

test('async on 2 processes × 2 devices: process 1 killed with SIGKILL, process 0 finishes with 2 of 4 devices', {
  timeout: 180_000,
}, async () => {
  const dir = tmpDir();
  const cfg = tinyJobConfig(dir);
  const port = randomPort();
  const env = (rank: number) => ({
    ...process.env,
    PARATRAIN_OFFLINE: '1',
    FORCE_COLOR: '0',
    RANK: String(rank),
    WORLD_SIZE: '2',
    MASTER_ADDR: '127.0.0.1',
    MASTER_PORT: String(port),
    PARATRAIN_SECRET: SECRET,
  });
  const leader = runCli(
    ['train', cfg, '--devices', '2', '--strategy', 'async', '--epochs', '40', '--out', join(dir, 'run')],
    { env: env(0), timeoutMs: 150_000 },
  );
  // process 1 is killed once process 0 has summarised three epochs in its metrics
  const metrics = join(dir, 'run', 'metrics.jsonl');
  const killed = new Promise<{ output: string; signal: NodeJS.Signals | null }>((resolve) => {
    const child = spawn(
      process.execPath,
      [...cliArgs(), 'train', cfg, '--devices', '2', '--strategy', 'async', '--epochs', '40'],
      { cwd: REPO, env: env(1), stdio: ['ignore', 'pipe', 'pipe'] },
    );
    let output = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => {
      output += d;
    });
    child.stderr.setEncoding('utf8').on('data', (d: string) => {
      output += d;
    });
    const poll = setInterval(() => {
      const epochs = existsSync(metrics) ? readFileSync(metrics, 'utf8').split('"type":"epoch"').length - 1 : 0;
      if (epochs >= 3) child.kill('SIGKILL');
    }, 20);
    child.on('close', (_code, signal) => {
      clearInterval(poll);
      resolve({ output, signal });
    });
  });
  const [r0, r1] = await Promise.all([leader, killed]);
  assert.equal(r1.signal, 'SIGKILL', `process 1 was to be killed mid-run: ${r1.output}`);
  assert.equal(r0.code, 0, r0.stderr);
  const lines = stderrLines(r0).join('\n');
  // the two links close in either order
  for (const device of [2, 3]) {
    assert.match(
      lines,
      new RegExp(
        `^paratrain: device ${device} \\(process 1\\) died at step \\d+ \\(process 1 stopped: its connection to the parameter server closed\\); async goes on with [23] of 4 devices$`,
        'm',
      ),
    );
  }
  // the 3-of-4 line, then (any lines later: the s flag lets . cross them) the 2-of-4 line
  assert.match(lines, /goes on with 3 of 4 devices$.*goes on with 2 of 4 devices$/ms);
  const events = readFileSync(join(dir, 'run', 'metrics.jsonl'), 'utf8')
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as Record<string, unknown>);
  assert.deepEqual(
    events
      .filter((e) => e.type === 'deviceLost')
      .map((e) => e.rank)
      .sort(),
    [2, 3],
  );
  assert.equal(events.find((e) => e.type === 'end')!.devicesLost, 2);
  assert.ok(existsSync(join(dir, 'run', 'model.safetensors')), 'the checkpoint is written');
  const lastStep = Math.max(...events.filter((e) => e.type === 'step').map((e) => e.step as number));
  assert.equal(lastStep, 40 * 3 - 1, "process 0's devices trained to the last step");
});
