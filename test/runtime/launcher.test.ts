/**
 * The launcher never leaves orphans and restarts dead jobs: children of a SIGKILLed launcher stop;
 * a child that ignores SIGTERM or is stopped (SIGSTOP) is SIGKILLed after the grace period;
 * --max-restarts restarts the whole job with `--resume RUN_DIR` in place of `--out RUN_DIR`, at
 * most N times. Stub children (small scripts) stand in for paratrain train where the mechanics
 * are all that is tested.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import { cliArgs, REPO, tmpDir } from '../cli/helpers.ts';
import { randomPort, tinyJobConfig } from './jobHelpers.ts';
import { launchJob } from '../../src/runtime/job/launcher.ts';
import { launchWithRestarts, resumeArgs, withRunDir } from '../../src/runtime/job/launchRestarts.ts';

/** A stub child: a script run by node with the job's arguments after it. */
function stub(dir: string, body: string): string[] {
  const file = join(dir, `stub-${Math.random().toString(36).slice(2)}.mjs`);
  writeFileSync(
    file,
    `import { appendFileSync } from 'node:fs';\nconst rank = Number(process.env.RANK);\nconst args = process.argv.slice(2);\n${body}\n`,
  );
  return [process.execPath, file];
}

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

async function waitUntil(what: string, ok: () => boolean, ms: number): Promise<void> {
  const end = Date.now() + ms;
  while (!ok()) {
    if (Date.now() > end) throw new Error(`timed out waiting: ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

const quiet = () => ({ out: new PassThrough().resume(), err: new PassThrough().resume() });

test('a child that ignores SIGTERM, and one stopped by SIGSTOP, are SIGKILLed after the grace period', {
  timeout: 60_000,
}, async () => {
  const dir = tmpDir('paratrain-launcher-');
  const command = stub(
    dir,
    `
    if (rank === 0) { process.on('SIGTERM', () => {}); setInterval(() => {}, 1000); }
    else if (rank === 1) process.kill(process.pid, 'SIGSTOP');
    else setTimeout(() => process.exit(3), 300);`,
  );
  const started = Date.now();
  const outcome = await launchJob({
    nprocPerNode: 3,
    nnodes: 1,
    nodeRank: 0,
    masterAddr: '127.0.0.1',
    masterPort: randomPort(),
    args: [],
    command,
    graceMs: 200,
    killGraceMs: 500,
    ...quiet(),
  });
  assert.deepEqual(outcome.failure, { rank: 2, code: 3, signal: null });
  assert.equal(outcome.code, 3);
  assert.ok(Date.now() - started < 15_000, 'the launcher did not wait for the deaf and the stopped child');
});

test("the job's failure is the process killed from outside, even when a peer exits first on noticing it", {
  timeout: 60_000,
}, async () => {
  const dir = tmpDir('paratrain-launcher-');
  // rank 0 exits 1 first (as a peer does on a closed connection); rank 1 is SIGKILLed after it (by itself: not the launcher)
  const command = stub(
    dir,
    `
    if (rank === 0) process.exit(1);
    else setTimeout(() => process.kill(process.pid, 'SIGKILL'), 300);`,
  );
  const err = new PassThrough();
  let said = '';
  err.on('data', (d) => {
    said += d;
  });
  const outcome = await launchJob({
    nprocPerNode: 2,
    nnodes: 1,
    nodeRank: 0,
    masterAddr: '127.0.0.1',
    masterPort: randomPort(),
    args: [],
    command,
    graceMs: 5000,
    killGraceMs: 500,
    out: new PassThrough().resume(),
    err,
  });
  assert.deepEqual(outcome.failure, { rank: 1, code: null, signal: 'SIGKILL' });
  assert.equal(outcome.code, 137);
  assert.match(said, /process 1 was killed by SIGKILL/);
  // the signals the launcher itself sends (after graceMs) are not a cause: the first failure stays it
  const deaf = stub(dir, `if (rank === 0) process.exit(4); else setInterval(() => {}, 1000);`);
  const second = await launchJob({
    nprocPerNode: 2,
    nnodes: 1,
    nodeRank: 0,
    masterAddr: '127.0.0.1',
    masterPort: randomPort(),
    args: [],
    command: deaf,
    graceMs: 100,
    killGraceMs: 500,
    ...quiet(),
  });
  assert.deepEqual(second.failure, { rank: 0, code: 4, signal: null });
});

test('the children of a SIGKILLed launcher stop within seconds', { timeout: 180_000 }, async () => {
  const dir = tmpDir('paratrain-launcher-'),
    out = join(dir, 'run');
  const cfg = tinyJobConfig(dir);
  writeFileSync(cfg, readFileSync(cfg, 'utf8').replace('epochs: 1,', 'epochs: 400,'));
  const launcher = spawn(
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
      cfg,
      '--devices',
      '1',
      '--out',
      out,
      '--quiet',
    ],
    { cwd: REPO, env: { ...process.env, PARATRAIN_OFFLINE: '1' }, stdio: 'ignore' },
  );
  const metrics = join(out, 'metrics.jsonl');
  await waitUntil(
    'the first step',
    () => existsSync(metrics) && readFileSync(metrics, 'utf8').includes('"type":"step"'),
    120_000,
  );
  const listed = execFileSync('ps', ['-o', 'pid=,args=', '--ppid', String(launcher.pid)], { encoding: 'utf8' });
  const children = listed
    .split('\n')
    .filter((l) => l.includes(' train '))
    .map((l) => Number(l.trim().split(' ')[0]));
  assert.equal(children.length, 2, listed);
  launcher.kill('SIGKILL');
  await waitUntil('the children to stop', () => children.every((pid) => !alive(pid)), 15_000);
});

test('--max-restarts restarts the whole job with --resume RUN_DIR, on fresh ports, at most N times', {
  timeout: 60_000,
}, async () => {
  const dir = tmpDir('paratrain-launcher-');
  const log = join(dir, 'log.jsonl');
  // the first attempt's rank 1 dies by SIGKILL; a resumed job finishes
  const once = stub(
    dir,
    `
    appendFileSync(${JSON.stringify(log)}, JSON.stringify({ rank, args, port: process.env.MASTER_PORT }) + '\\n');
    if (rank === 1 && !args.includes('--resume')) process.kill(process.pid, 'SIGKILL');`,
  );
  const err = new PassThrough();
  let said = '';
  err.on('data', (d) => {
    said += d;
  });
  const port = randomPort();
  const code = await launchWithRestarts({
    nprocPerNode: 2,
    nnodes: 1,
    nodeRank: 0,
    masterAddr: '127.0.0.1',
    masterPort: port,
    args: ['train', 'x.yaml', '--out', 'runs/a'],
    command: once,
    graceMs: 100,
    killGraceMs: 500,
    maxRestarts: 2,
    out: new PassThrough().resume(),
    err,
  });
  assert.equal(code, 0, said);
  assert.match(
    said,
    /paratrain launch: process 1 died \(signal SIGKILL\); restarting the job from its last checkpoint \(restart 1 of 2\)/,
  );
  const runs = readFileSync(log, 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l));
  // the first attempt's rank 0 may be stopped (graceMs) before it logs; rank 1 logged before it died
  const first = runs.filter((r) => !r.args.includes('--resume'));
  assert.ok(
    first.some((r) => r.rank === 1),
    'the first attempt ran rank 1',
  );
  assert.ok(first.length <= 2, 'one first attempt');
  const second = runs.filter((r) => r.args.includes('--resume'));
  assert.equal(second.length, 2);
  for (const r of second) {
    assert.deepEqual(r.args, ['train', 'x.yaml', '--resume', 'runs/a']);
    assert.notEqual(Number(r.port), port, 'a fresh port');
  }

  // a job that always dies is restarted exactly N times and ends with the dead process's code
  const log2 = join(dir, 'log2.jsonl');
  const always = stub(dir, `appendFileSync(${JSON.stringify(log2)}, 'x\\n'); if (rank === 0) process.exit(5);`);
  const code2 = await launchWithRestarts({
    nprocPerNode: 2,
    nnodes: 1,
    nodeRank: 0,
    masterAddr: '127.0.0.1',
    masterPort: port,
    args: ['train', 'x.yaml'],
    command: always,
    graceMs: 5000,
    killGraceMs: 500,
    maxRestarts: 2,
    ...quiet(),
  });
  assert.equal(code2, 5);
  assert.equal(readFileSync(log2, 'utf8').split('\n').filter(Boolean).length, 6, '1 + 2 attempts of 2 processes');
});

test('restart arguments: a job without --out gets runs/<timestamp>; restarts swap --out for --resume', () => {
  const { args, runDir } = withRunDir(['train', 'c.yaml', '--devices', '2']);
  assert.match(runDir, /^runs\/\d{8}-\d{6}-[0-9a-f]{4}$/);
  assert.deepEqual(args, ['train', 'c.yaml', '--devices', '2', '--out', runDir]);
  assert.deepEqual(withRunDir(['train', 'c.yaml', '--out=r']).runDir, 'r');
  assert.deepEqual(resumeArgs(['train', 'c.yaml', '--out=r', '--force'], 'r'), [
    'train',
    'c.yaml',
    '--force',
    '--resume',
    'r',
  ]);
});
