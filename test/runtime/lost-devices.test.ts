/**
 * Workers that die under the parameter-server strategies that need no lockstep: async (Downpour)
 * and asynchronous EASGD go on with the devices that remain, count the loss in the metrics, and end
 * normally with a checkpoint of the server's weights. Every other strategy still fails the job
 * (test/parallel/failures.test.ts).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { train } from '../../src/runtime/run/train.ts';
import { tinyConfig } from '../parallel/helpers.ts';

async function runWithLostDevice(strategy: unknown) {
  const out = join(mkdtempSync(join(tmpdir(), 'paratrain-lost-')), 'run');
  const logs: string[] = [];
  // 96 samples, global batch 24: 4 steps an epoch, 3 epochs; device 1 throws at step 2
  const result = await train(tinyConfig({ train: { devices: 3, strategy, epochs: 3 } }), {
    out,
    failAt: { rank: 1, step: 2 },
    log: (m) => logs.push(m),
  });
  const events = readFileSync(join(out, 'metrics.jsonl'), 'utf8')
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as Record<string, unknown>);
  return { result, events, logs, out };
}

for (const [name, strategy, label] of [
  ['async', 'async', 'async'],
  ['asynchronous EASGD', { easgd: { alpha: 0.1, period: 1, mode: 'async' } }, 'asynchronous EASGD'],
] as const) {
  test(`${name}: a device that dies is dropped, the others train on, and the run ends with a checkpoint`, {
    timeout: 120_000,
  }, async () => {
    const { result, events, logs } = await runWithLostDevice(strategy);
    assert.ok(existsSync(result.checkpoint), "the checkpoint is written from the server's weights");
    assert.ok(Number.isFinite(result.testAccuracy), 'the last evaluation ran');
    const lost = events.filter((e) => e.type === 'deviceLost');
    assert.equal(lost.length, 1);
    assert.equal(lost[0]!.rank, 1);
    assert.equal(lost[0]!.step, 2);
    assert.match(String(lost[0]!.reason), /injected failure at step 2/);
    assert.equal(events.find((e) => e.type === 'end')!.devicesLost, 1, 'the end event counts the lost device');
    const steps = (rank: number) =>
      events.filter((e) => e.type === 'step' && e.rank === rank).map((e) => e.step as number);
    assert.deepEqual(steps(1), [0, 1], 'the dead device made no step from 2 on');
    assert.equal(Math.max(...steps(0)), 11, 'device 0 trained to the end');
    assert.equal(Math.max(...steps(2)), 11, 'device 2 trained to the end');
    assert.equal(
      events.filter((e) => e.type === 'epoch').length,
      3,
      'every epoch is summarised over the devices that remain',
    );
    assert.ok(
      logs.some((l) =>
        new RegExp(
          `^paratrain: device 1 died at step 2 \\(injected failure at step 2\\); ${label} goes on with 2 of 3 devices$`,
        ).test(l),
      ),
      logs.join('\n'),
    );
  });
}

test('async: device 0 (which evaluates and checkpoints) dying still fails the job', { timeout: 60_000 }, async () => {
  const out = join(mkdtempSync(join(tmpdir(), 'paratrain-lost-')), 'run');
  await assert.rejects(
    train(tinyConfig({ train: { devices: 3, strategy: 'async' } }), { out, failAt: { rank: 0, step: 1 } }),
    /device 0 failed: injected failure at step 1/,
  );
});
