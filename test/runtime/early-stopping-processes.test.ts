/**
 * Early stopping across processes: process 0's main thread hears device 0's verdicts and tells the
 * other processes over the stop control world (HOLD to go on, FINAL to stop), so both processes of
 * a 2-process job stop after the same step and exit 0. Without a validation split the test loss
 * is watched; a learning rate of 1e-9 keeps it from improving by minDelta.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { runCli, tmpDir } from '../cli/helpers.ts';
import { randomPort, SECRET, tinyJobConfig } from './jobHelpers.ts';
import { readCheckpoint } from '../../src/runtime/checkpoint/checkpoint.ts';

test('2 processes stop early after the same step, agreed over the control world', { timeout: 120_000 }, async () => {
  const dir = tmpDir('paratrain-early-');
  const file = tinyJobConfig(dir, ', earlyStopping: { patience: 1, minDelta: 0.01 }');
  writeFileSync(
    file,
    readFileSync(file, 'utf8')
      .replace('lr: 0.05', 'lr: 1.0e-9')
      .replace('epochs: 1,', 'epochs: 5,')
      .replace('evalEvery: 0,', 'evalEvery: 1,'),
  );
  const p = randomPort(),
    out = join(dir, 'run');
  const env = (rank: number) => ({
    RANK: String(rank),
    WORLD_SIZE: '2',
    MASTER_ADDR: '127.0.0.1',
    MASTER_PORT: String(p),
    PARATRAIN_SECRET: SECRET,
  });
  const [r0, r1] = await Promise.all(
    [0, 1].map((rank) => runCli(['train', file, '--out', out, '--quiet'], { env: env(rank), timeoutMs: 90_000 })),
  );
  // 96 samples, batch 8 on 2 devices: 6 steps an epoch; epoch 0 sets the best, epoch 1 is the one without improvement
  for (const [rank, r] of [
    [0, r0!],
    [1, r1!],
  ] as const) {
    assert.equal(r.code, 0, `process ${rank}: ${r.stderr}`);
    const summary = JSON.parse(r.stdout.trim().split('\n').at(-1)!) as {
      earlyStopped?: { step: number; epoch: number; metric: string };
    };
    assert.deepEqual(
      [summary.earlyStopped?.step, summary.earlyStopped?.epoch, summary.earlyStopped?.metric],
      [12, 1, 'testLoss'],
      `process ${rank}: ${r.stdout}`,
    );
  }
  const events = readFileSync(join(out, 'metrics.jsonl'), 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as Record<string, unknown>);
  assert.equal(
    Math.max(...events.filter((e) => e.type === 'step').map((e) => e.step as number)),
    11,
    "process 0's device ran steps 0 … 11",
  );
  assert.equal(readCheckpoint(join(out, 'model.safetensors')).metadata.step, '12');
  assert.ok(events.some((e) => e.type === 'earlyStopped'));
});
