/**
 * The stall inspector end to end on a parameter server in another process: a 2-process async job
 * whose process 1 stops (SIGSTOP) mid-run. Device 0 finishes its steps and waits for the server's
 * end-of-run barrier; past train.stallWarningSeconds it asks its peers where they are, the server
 * answers that it waits for device 1, and device 0 logs one line naming device 1 as the one that has
 * not arrived, with the server's words. Resumed (SIGCONT), the job finishes.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { cliArgs, REPO, tmpDir } from '../cli/helpers.ts';
import { randomPort, SECRET, tinyJobConfig } from './jobHelpers.ts';

function start(
  args: string[],
  env: Record<string, string>,
): { child: ChildProcess; output: () => string; exit: Promise<number | null> } {
  const child = spawn(process.execPath, [...cliArgs(), ...args], {
    cwd: REPO,
    env: { ...process.env, PARATRAIN_OFFLINE: '1', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  for (const s of [child.stdout!, child.stderr!])
    s.setEncoding('utf8').on('data', (d: string) => {
      out += d;
    });
  const exit = new Promise<number | null>((resolve) => child.on('close', (code) => resolve(code)));
  return { child, output: () => out, exit };
}

const until = async (what: string, ok: () => boolean, ms = 60_000) => {
  for (const end = Date.now() + ms; !ok(); await new Promise((r) => setTimeout(r, 20)))
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
};

test("async over 2 processes, process 1 stopped: device 0 waiting at the end names device 1 and the server's view of it; the job then finishes", {
  timeout: 120_000,
}, async () => {
  const dir = tmpDir('paratrain-stall-remote-'),
    out = join(dir, 'run');
  const cfg = tinyJobConfig(dir, ', devices: 1, strategy: async, stallWarningSeconds: 0.3, checkpointEvery: 0');
  // 36 steps a device; device 1 sleeps twice its compute time each step, so it is still training when stopped
  writeFileSync(cfg, readFileSync(cfg, 'utf8').replace('epochs: 1,', 'epochs: 6,'));
  const port = randomPort();
  const env = (rank: number) => ({
    RANK: String(rank),
    WORLD_SIZE: '2',
    MASTER_ADDR: '127.0.0.1',
    MASTER_PORT: String(port),
    PARATRAIN_SECRET: SECRET,
  });
  const args = ['train', cfg, '--out', out, '--slow-device', '1:3'];
  const p0 = start(args, env(0)),
    p1 = start(args, env(1));
  let stopped = false;
  try {
    const metrics = join(out, 'metrics.jsonl');
    await until('the first step', () => existsSync(metrics) && readFileSync(metrics, 'utf8').includes('"type":"step"'));
    p1.child.kill('SIGSTOP');
    stopped = true;
    await until('the stall line', () => /paratrain: stall: .*\n/.test(p0.output()));
  } finally {
    if (stopped) p1.child.kill('SIGCONT');
  }
  const [c0, c1] = await Promise.all([p0.exit, p1.exit]);
  assert.equal(c0, 0, p0.output());
  assert.equal(c1, 0, p1.output());
  const line = p0
    .output()
    .split('\n')
    .find((l) => l.startsWith('paratrain: stall: '))!;
  assert.match(
    line,
    /^paratrain: stall: device 0 \(process 0\) has waited \d+\.\d s in recv from rank 0 .* for device 1 \(process 1\) \(where the others are — /,
    line,
  );
  assert.match(
    line,
    /the parameter server \(process 0\): serving; devices last asked at steps 0: done, 1: \d+/,
    "the server's own words",
  );
  assert.match(line, /device 1 \(process 1\): no answer within \d+ ms/, 'the stopped process cannot answer');
  const stall = readFileSync(join(out, 'metrics.jsonl'), 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l))
    .find((e) => e.type === 'stall');
  assert.ok(stall, 'a stall event in metrics.jsonl');
  assert.deepEqual(stall.missing, [2], "device 1 is rank 2 of the parameter server's world");
});
