/**
 * One run per run directory: process 0 locks RUN_DIR/.lock before it looks inside. Two real
 * `paratrain train` processes racing for one --out: one trains, the other is refused with one line
 * naming the holder; `--force` and `--resume` on the live run's directory are refused and delete
 * nothing; the lock goes when the run stops; a lock whose process is dead is taken over.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { cliArgs, REPO, runCli, tmpDir } from '../cli/helpers.ts';
import { tinyJobConfig } from './jobHelpers.ts';
import { LOCK_FILE, lockRunDir } from '../../src/runtime/files/runLock.ts';
import { createRunDir } from '../../src/runtime/files/runDir.ts';
import { RunLockHolder } from '../../src/runtime/files/runLock.ts';

interface Exit {
  code: number | null;
  stderr: string;
}

/** `paratrain train …` as a child; `exited` resolves when it ends (SIGKILLed after 3 minutes). */
function startTrain(args: string[]): { pid: number; exited: Promise<Exit>; stderr: () => string; stop: () => void } {
  const child = spawn(process.execPath, [...cliArgs(), 'train', ...args], {
    cwd: REPO,
    env: { ...process.env, PARATRAIN_OFFLINE: '1', FORCE_COLOR: '0' },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  child.stderr.setEncoding('utf8').on('data', (d: string) => {
    stderr += d;
  });
  const killer = setTimeout(() => child.kill('SIGKILL'), 180_000);
  const exited = new Promise<Exit>((resolve, reject) => {
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(killer);
      resolve({ code, stderr });
    });
  });
  return { pid: child.pid!, exited, stderr: () => stderr, stop: () => child.kill('SIGINT') };
}

/** The lines a command wrote, without Node's own warnings. */
const lines = (stderr: string) =>
  stderr.split('\n').filter((l) => l !== '' && !/^\(node:\d+\) Warning:|^\(Use `node --trace-warnings/.test(l));

/** A tiny job that runs far longer than the test waits (it is stopped with SIGINT). */
function longJob(dir: string, extra = ''): string {
  const file = tinyJobConfig(dir, extra);
  writeFileSync(file, readFileSync(file, 'utf8').replace('epochs: 1,', 'epochs: 400,'));
  return file;
}

const until = async (what: string, ok: () => boolean, ms = 90_000) => {
  for (const end = Date.now() + ms; !ok(); ) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
};

/** The pid of a process that has exited (and so is dead). */
function deadPid(): number {
  const r = spawnSync(process.execPath, ['-e', '0']);
  return r.pid!;
}

const refusal = (dir: string, pid: number) =>
  new RegExp(
    `^paratrain: run directory ${dir.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')} is in use by another run \\(pid ${pid} on host ${hostname()}, since \\d{4}-\\d\\d-\\d\\dT[\\d:.]+Z\\); wait for it to end, or, if that process is gone, remove .*\\.lock$`,
  );

test('two runs racing for one --out: one trains, the other is refused naming it; --force and --resume are refused and delete nothing', {
  timeout: 240_000,
}, async () => {
  const dir = tmpDir('paratrain-lock-'),
    out = join(dir, 'run');
  const cfg = longJob(dir, ', checkpointEvery: { steps: 2 }');
  const runs = [startTrain([cfg, '--out', out]), startTrain([cfg, '--out', out])];
  try {
    // the one refused exits at once; the other trains until stopped
    let timer: NodeJS.Timeout | undefined;
    const first = await Promise.race([
      ...runs.map((r, i) => r.exited.then(() => i)),
      new Promise<number>((r) => {
        timer = setTimeout(() => r(-1), 90_000);
      }),
    ]);
    clearTimeout(timer);
    assert.notEqual(first, -1, `neither run was refused:\n${runs.map((r) => r.stderr()).join('\n---\n')}`);
    const refused = await runs[first]!.exited,
      holder = runs[1 - first]!;
    assert.equal(refused.code, 1, refused.stderr);
    assert.equal(lines(refused.stderr).length, 1, refused.stderr);
    assert.match(lines(refused.stderr)[0]!, refusal(out, holder.pid));

    // the run that holds the directory writes checkpoint sets; what a resume would clean stays
    const sets = join(out, 'checkpoints');
    await until('a checkpoint set', () => existsSync(sets) && readdirSync(sets).some((n) => /^step-\d+$/.test(n)));
    const planted = join(sets, 'step-99999999.partial');
    mkdirSync(planted, { recursive: true });
    writeFileSync(join(planted, 'device-0.safetensors'), 'being written');
    for (const args of [
      [cfg, '--out', out, '--force'],
      ['--resume', out],
    ]) {
      const r = await runCli(['train', ...args, '--quiet']);
      assert.equal(r.code, 1, r.stderr);
      assert.equal(lines(r.stderr).length, 1, r.stderr);
      assert.match(lines(r.stderr)[0]!, refusal(out, holder.pid), args.join(' '));
    }
    assert.ok(existsSync(join(planted, 'device-0.safetensors')), 'the refused resume removed nothing');
    assert.ok(existsSync(join(out, LOCK_FILE)));

    // stopped, the run frees its directory
    holder.stop();
    const stopped = await holder.exited;
    assert.equal(stopped.code, 130, stopped.stderr);
    assert.ok(!existsSync(join(out, LOCK_FILE)), 'the lock is gone once the run stopped');
    const events = readFileSync(join(out, 'metrics.jsonl'), 'utf8').split('\n').filter(Boolean);
    assert.equal(events.filter((l) => l.includes('"type":"start"')).length, 1, 'one run wrote metrics.jsonl');
  } finally {
    for (const r of runs) r.stop();
  }
});

test('a lock whose process is dead is taken over with one line naming it, and released at the end', {
  timeout: 120_000,
}, async () => {
  const dir = tmpDir('paratrain-lock-'),
    out = join(dir, 'run');
  mkdirSync(out);
  const pid = deadPid();
  writeFileSync(join(out, LOCK_FILE), JSON.stringify({ pid, host: hostname(), since: '2025-01-02T03:04:05.000Z' }));
  const r = await runCli(['train', tinyJobConfig(dir), '--out', out]);
  assert.equal(r.code, 0, r.stderr);
  assert.ok(
    r.stderr.includes(
      `run directory ${out}: took over the lock of a run that is gone (pid ${pid} on host ${hostname()}, since 2025-01-02T03:04:05.000Z)`,
    ),
    r.stderr,
  );
  assert.ok(!existsSync(join(out, LOCK_FILE)), 'released at the end');
  assert.ok(existsSync(join(out, 'model.safetensors')));
});

test('lockRunDir: a live holder in this process is refused; another host cannot be checked; release frees it', () => {
  const dir = tmpDir('paratrain-lock-');
  const lock = lockRunDir(dir);
  const held = JSON.parse(readFileSync(join(dir, LOCK_FILE), 'utf8'));
  assert.equal(held.pid, process.pid);
  assert.equal(held.host, hostname());
  assert.throws(
    () => lockRunDir(dir),
    (e: Error) => refusal(dir, process.pid).test(`paratrain: ${e.message}`),
  );
  lock.release();
  assert.ok(!existsSync(join(dir, LOCK_FILE)));
  lock.release(); // once

  writeFileSync(join(dir, LOCK_FILE), JSON.stringify({ pid: 1, host: 'elsewhere.example', since: 'then' }));
  assert.throws(
    () => lockRunDir(dir),
    /^Error: run directory .* is in use by a run on another host \(pid 1 on host elsewhere\.example, since then\), which this host cannot check; wait for it to end, or, if that process is gone, remove .*\.lock$/,
  );
});

test('four processes finding the same dead holder: exactly one takes the lock over', { timeout: 60_000 }, async () => {
  const dir = tmpDir('paratrain-lock-');
  writeFileSync(join(dir, LOCK_FILE), JSON.stringify({ pid: deadPid(), host: hostname(), since: 'then' }));
  // the one that takes it holds it until all four have answered, so the others find it alive
  const script = `
    import { lockRunDir } from './src/runtime/files/runLock.ts';
    try {
      lockRunDir(${JSON.stringify(dir)});
      console.log('took');
      setInterval(() => {}, 1000);
    } catch (e) {
      console.log(e.message.includes('is in use by another run') ? 'refused' : e.message);
    }`;
  const children = Array.from({ length: 4 }, () =>
    spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], { cwd: REPO }),
  );
  const outcomes = await Promise.all(
    children.map(
      (child) =>
        new Promise<string>((resolve) => {
          child.stdout.setEncoding('utf8').on('data', (d: string) => resolve(d.trim()));
          child.on('close', () => resolve('(no answer)'));
        }),
    ),
  );
  for (const child of children) child.kill();
  assert.deepEqual(outcomes.sort(), ['refused', 'refused', 'refused', 'took']);
});

test('a lock that does not say who holds it is refused, naming the file to remove', () => {
  const dir = tmpDir('paratrain-lock-');
  writeFileSync(join(dir, LOCK_FILE), '');
  assert.throws(
    () => lockRunDir(dir),
    /^Error: run directory .* is locked \(.*\.lock\), and the lock does not say by whom; if no run uses .*, remove .*\.lock and run again$/,
  );
});

test('a lock taken over by another run is not removed by the run that lost it', () => {
  const dir = tmpDir('paratrain-lock-');
  const lock = lockRunDir(dir);
  const other = JSON.stringify({ pid: deadPid(), host: hostname(), since: 'later' });
  writeFileSync(join(dir, LOCK_FILE), other);
  lock.release();
  assert.equal(readFileSync(join(dir, LOCK_FILE), 'utf8'), other);
});

test('a live pid that started after the lock was taken (a reused pid) is not the holder', {
  skip: !existsSync('/proc/self/stat') && 'needs /proc (Linux)',
}, () => {
  const dir = tmpDir('paratrain-lock-');
  const boot = readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim();
  // our parent runs, but not since clock tick 1
  writeFileSync(
    join(dir, LOCK_FILE),
    JSON.stringify({ pid: process.ppid, host: hostname(), since: 'then', boot, started: 1 }),
  );
  const said: string[] = [];
  lockRunDir(dir, (m) => said.push(m)).release();
  assert.deepEqual(said, [
    `run directory ${dir}: took over the lock of a run that is gone (pid ${process.ppid} on host ${hostname()}, since then)`,
  ]);
});

test('createRunDir with a lock: a directory holding only a dead run lock is used; --force does not pass a live lock', () => {
  const dir = tmpDir('paratrain-lock-'),
    out = join(dir, 'run');
  mkdirSync(out);
  writeFileSync(join(out, LOCK_FILE), JSON.stringify({ pid: deadPid(), host: hostname(), since: 'then' }));
  const holder = new RunLockHolder();
  assert.equal(createRunDir({ out, lock: holder }), out);
  writeFileSync(join(out, 'config.yaml'), 'x');
  for (const force of [false, true])
    assert.throws(() => createRunDir({ out, force, lock: new RunLockHolder() }), /is in use by another run/);
  holder.release();
  assert.throws(() => createRunDir({ out, lock: new RunLockHolder() }), /already holds files \(config\.yaml\)/);
  const forced = new RunLockHolder();
  assert.equal(createRunDir({ out, force: true, lock: forced }), out);
  forced.release();
  // a timestamped run directory is locked as well
  const stamped = new RunLockHolder();
  const made = createRunDir({ root: join(dir, 'runs'), lock: stamped });
  assert.ok(existsSync(join(made, LOCK_FILE)));
  stamped.release();
  assert.deepEqual(readdirSync(made), []);
});
