/**
 * Crash consistency for real: `paratrain train`, writing a checkpoint set every step, is killed with
 * SIGKILL at each moment of the set-writing protocol (PARATRAIN_CRASH_AT, runtime/faults/crashPoints.ts: the
 * process kills itself there, a real crash at an exact point), then resumed with `--resume`. Whatever
 * the moment, the resume removes what the dead writer left, starts from the newest complete set and
 * ends bit-identical to the uninterrupted run.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { spawnSync } from 'node:child_process';
import { cliArgs, REPO, tmpDir } from '../cli/helpers.ts';
import { tinyJobConfig } from './jobHelpers.ts';
import { assertSameTensors, tensorsOf } from './resumeHelpers.ts';
import { loadConfig } from '../../src/config/index.ts';
import { train } from '../../src/runtime/run/train.ts';

const WIDE = `
    - flatten: {}
    - dense: { units: 64, activation: relu }
    - dense: { units: 10 }`;

/** The tree of the run's checkpoints directory, as relative paths. */
function tree(runDir: string): string[] {
  const sets = join(runDir, 'checkpoints');
  return existsSync(sets) ? readdirSync(sets, { recursive: true }).map(String).sort() : [];
}

/** `paratrain train` that must die by SIGKILL at `crashAt`; returns its stderr. */
function crashedRun(args: string[], crashAt: string): void {
  const r = spawnSync(process.execPath, [...cliArgs(), ...args], {
    cwd: REPO,
    env: { ...process.env, PARATRAIN_OFFLINE: '1', PARATRAIN_CRASH_AT: crashAt },
    encoding: 'utf8',
    timeout: 120_000,
  });
  assert.equal(r.signal, 'SIGKILL', `killed at ${crashAt}: ${r.stderr}`);
}

const cases: { devices: number; crashAt: string; left: RegExp | null }[] = [
  // a torn temporary file of a device's set file
  { devices: 1, crashAt: 'checkpoint-tmp@5', left: /\.partial\/device-0\.safetensors\.tmp-\d+$/ },
  // a set whose files are all there but not its state.json: incomplete, ignored, removed
  { devices: 1, crashAt: 'set-files@3', left: /^step-00000003\.partial\/model\.safetensors$/ },
  // state.json written, the directory not renamed: still .partial, still ignored
  { devices: 1, crashAt: 'set-state@3', left: /^step-00000003\.partial\/state\.json$/ },
  // complete and renamed, the older sets not pruned yet: one set too many, harmless
  { devices: 1, crashAt: 'set-renamed@4', left: null },
  // two device threads: one of them dies inside its own file's write
  { devices: 2, crashAt: 'checkpoint-tmp@3', left: /\.partial\/device-\d\.safetensors\.tmp-\d+$/ },
];

test('SIGKILL at every moment of a checkpoint set write: the resume cleans up and ends bit-identical', {
  timeout: 300_000,
}, async (t) => {
  const dir = tmpDir();
  const cfg = tinyJobConfig(dir, ', checkpointEvery: { steps: 1 }, keepLast: 2, strategy: hybrid', WIDE);
  const config = loadConfig(cfg);
  // the uninterrupted runs and the resumes run in this process; only the runs that crash are children
  const reference = new Map<number, Map<string, Float32Array>>();
  for (const devices of [1, 2]) {
    const whole = await train(
      { ...config, train: { ...config.train, devices } },
      { out: join(dir, `whole-${devices}`) },
    );
    reference.set(devices, tensorsOf(whole.checkpoint));
  }
  for (const { devices, crashAt, left } of cases) {
    const out = join(dir, `${crashAt}-${devices}`);
    crashedRun(['train', cfg, '--devices', String(devices), '--out', out, '--quiet'], crashAt);
    const after = tree(out);
    t.diagnostic(`${crashAt} on ${devices}: ${after.join(' ')}`);
    if (left)
      assert.ok(
        after.some((f) => left.test(f)),
        `${crashAt}: the dead writer left ${left} (${after.join(', ')})`,
      );
    else
      assert.equal(
        after.filter((f) => /^step-\d+$/.test(f)).length,
        3,
        `${crashAt}: three complete sets before pruning (${after.join(', ')})`,
      );
    await train({ ...config, train: { ...config.train, devices } }, { resume: out });
    assert.deepEqual(
      tree(out).filter((f) => /\.partial|\.tmp-/.test(f)),
      [],
      `${crashAt}: nothing of the dead writer is left`,
    );
    assertSameTensors(reference.get(devices)!, tensorsOf(join(out, 'model.safetensors')));
  }
});
