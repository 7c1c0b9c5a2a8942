/**
 * `paratrain train --resume`: a training process killed with SIGKILL mid-epoch resumes from its
 * newest complete checkpoint set and ends bit-identical to the uninterrupted run; a kill during a
 * checkpoint write leaves the previous set intact and its temp files are gone after the next start;
 * a missing run directory, a run without a complete set and a changed model are one clear line.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { cliArgs, REPO, runCli, stderrLines, tmpDir } from './helpers.ts';
import { assertSameTensors, tensorsOf, writeResumeConfig } from '../runtime/resumeHelpers.ts';
import { trainHere } from '../runtime/jobHelpers.ts';
import { latestCompleteSet } from '../../src/runtime/checkpoint/checkpointSet.ts';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
/** A dead pid: a process that has exited. */
function deadPid(): number {
  return 2 ** 22 + 12345;
}

test('kill -9 mid-epoch, then --resume: ends bit-identical to the uninterrupted run', async () => {
  const dir = tmpDir();
  const config = writeResumeConfig(dir);
  // the uninterrupted run, in this process (the CLI's path is the killed run and its resume)
  await trainHere(config, join(dir, 'whole'));

  const runDir = join(dir, 'killed');
  // a straggler factor slows the run enough to kill it between sets
  const child = spawn(
    process.execPath,
    [...cliArgs(), 'train', config, '--out', runDir, '--quiet', '--slow-device', '0:4'],
    { cwd: REPO, env: { ...process.env, PARATRAIN_OFFLINE: '1' }, stdio: 'ignore' },
  );
  const exited = new Promise((r) => child.on('close', r));
  const deadline = Date.now() + 180_000;
  while (!((latestCompleteSet(runDir)?.state.step ?? 0) >= 10) && Date.now() < deadline) await sleep(50);
  child.kill('SIGKILL');
  await exited;
  const killedAt = latestCompleteSet(runDir)?.state.step ?? 0;
  assert.ok(killedAt >= 10 && killedAt < 120, `killed mid-run (newest set at step ${killedAt})`);
  assert.ok(!existsSync(join(runDir, 'model.safetensors')), 'the run had not finished');

  const resumed = await runCli(['train', '--resume', runDir, '--quiet'], { timeoutMs: 240_000 });
  assert.equal(resumed.code, 0, resumed.stderr);
  assertSameTensors(tensorsOf(join(dir, 'whole', 'model.safetensors')), tensorsOf(join(runDir, 'model.safetensors')));
  assert.match(readFileSync(join(runDir, 'metrics.jsonl'), 'utf8'), /"type":"resume"/);
});

test('a kill during a checkpoint write: the previous set is used and the leftovers are gone after the next start', async () => {
  const dir = tmpDir();
  const config = writeResumeConfig(dir);
  const runDir = join(dir, 'run');
  const failed = await runCli(['train', config, '--out', runDir, '--quiet'], {
    env: { PARATRAIN_FAIL_AT: '0:12' },
    timeoutMs: 240_000,
  });
  assert.equal(failed.code, 1);
  assert.equal(latestCompleteSet(runDir)?.state.step, 10);
  // what a writer killed while writing set 15 and the model file leaves behind
  const partial = join(runDir, 'checkpoints', 'step-00000015.partial');
  mkdirSync(partial);
  writeFileSync(join(partial, `device-0.safetensors.tmp-${deadPid()}`), 'half a file');
  writeFileSync(join(runDir, `model.safetensors.tmp-${deadPid()}`), 'half a file');
  const unfinished = join(runDir, 'checkpoints', 'step-00000020');
  mkdirSync(unfinished);
  const resumed = await runCli(['train', '--resume', runDir, '--epochs', '1'], { timeoutMs: 240_000 });
  assert.equal(resumed.code, 0, resumed.stderr);
  assert.match(resumed.stderr, /removed what an interrupted run left/);
  assert.ok(!existsSync(partial), 'the partial set is removed');
  // a set folder without state.json is kept aside, not deleted, and said so
  assert.ok(!existsSync(unfinished) && existsSync(join(runDir, 'checkpoints', 'damaged', 'step-00000020')));
  assert.match(resumed.stderr, /checkpoint set step-00000020 failed verification: state\.json is missing; moved to /);
  assert.deepEqual(
    readdirSync(runDir).filter((n) => n.includes('.tmp-')),
    [],
  );
  const resume = readFileSync(join(runDir, 'metrics.jsonl'), 'utf8')
    .split('\n')
    .find((l) => l.includes('"type":"resume"'))!;
  assert.equal(JSON.parse(resume).step, 10);
});

test('--resume errors: a missing run directory, no complete set, a changed model: one line naming the fix', async () => {
  const dir = tmpDir();
  const config = writeResumeConfig(dir);
  const missing = await runCli(['train', '--resume', join(dir, 'nope')]);
  assert.equal(missing.code, 1);
  assert.deepEqual(stderrLines(missing), [
    `paratrain: --resume ${join(dir, 'nope')}: no such run directory; give the directory of the run to continue (e.g. runs/latest)`,
  ]);

  const empty = join(dir, 'empty');
  mkdirSync(empty);
  const none = await runCli(['train', config, '--resume', empty]);
  assert.equal(none.code, 1);
  assert.match(
    stderrLines(none).join('\n'),
    /^paratrain: --resume .*: no complete checkpoint set in .*checkpoints \(the run stopped before its first one\); start the run again without --resume/,
  );

  const runDir = join(dir, 'run');
  const failed = await runCli(['train', config, '--out', runDir, '--quiet'], {
    env: { PARATRAIN_FAIL_AT: '0:6' },
    timeoutMs: 120_000,
  });
  assert.equal(failed.code, 1);
  const other = join(dir, 'other.yaml');
  writeFileSync(other, readFileSync(config, 'utf8').replace('units: 16', 'units: 32'));
  const changed = await runCli(['train', other, '--resume', runDir]);
  assert.equal(changed.code, 1);
  assert.equal(stderrLines(changed).length, 1);
  assert.match(
    changed.stderr,
    /the config's model differs from the one the run trained .*resume with the run's own config .*config\.yaml\), or start a new run from its weights with --init-from/,
  );
});
