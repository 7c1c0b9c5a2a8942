/**
 * Resuming a run that already finished is not an error: `paratrain train --resume` says so, prints
 * its JSON line and exits 0 (a scheduler's retry loop around it ends), and `--epochs` with more
 * epochs trains it further; the library's train rejects with a RunFinishedError that says where it ended.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { runCli, stderrLines, tmpDir } from './helpers.ts';
import { writeResumeConfig } from '../runtime/resumeHelpers.ts';
import { loadConfig, train, RunFinishedError } from '../../src/index.ts';

test('--resume of a finished run: exit 0, saying it finished and how to train further', async () => {
  const dir = tmpDir();
  const config = writeResumeConfig(dir, { trainLimit: 48 });
  const runDir = join(dir, 'run');
  const first = await runCli(['train', config, '--out', runDir, '--quiet'], { timeoutMs: 120_000 });
  assert.equal(first.code, 0, first.stderr);

  const again = await runCli(['train', '--resume', runDir], { timeoutMs: 120_000 });
  assert.equal(again.code, 0, again.stderr);
  assert.deepEqual(stderrLines(again), [
    `paratrain: the run in ${runDir} finished at epoch 2 (step 12); nothing to resume — pass --epochs 3 (or more) to train further`,
  ]);
  assert.deepEqual(JSON.parse(again.stdout), { runDir, finished: { step: 12, epoch: 2 } });

  await assert.rejects(train(loadConfig(config), { resume: runDir }), (err: unknown) => {
    assert.ok(err instanceof RunFinishedError);
    assert.deepEqual([err.runDir, err.step, err.epoch], [runDir, 12, 2]);
    return true;
  });

  const further = await runCli(['train', '--resume', runDir, '--epochs', '3', '--quiet'], { timeoutMs: 120_000 });
  assert.equal(further.code, 0, further.stderr);
  assert.equal(JSON.parse(further.stdout).runDir, runDir);
});
