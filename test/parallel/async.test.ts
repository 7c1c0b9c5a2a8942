import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { train } from '../../src/runtime/run/train.ts';
import { readMetrics } from '../../src/runtime/events/metrics.ts';
import { tinyConfig } from './helpers.ts';

async function stepEvents(strategy: unknown, devices: number, trainLimit = 192) {
  const out = join(mkdtempSync(join(tmpdir(), 'paratrain-async-')), 'run');
  const result = await train(
    tinyConfig({
      optimizer: { adam: { lr: 0.003 } },
      data: { trainLimit },
      train: { devices, strategy, evalEvery: 1 },
    }),
    { out },
  );
  const events = readMetrics(join(out, 'metrics.jsonl'));
  return {
    result,
    steps: events.filter((e) => e.type === 'step') as unknown as {
      rank: number;
      staleness?: number;
      dropped?: number;
      samples: number;
    }[],
  };
}

test('async (Downpour): every pushed gradient records its staleness; the model trains', async () => {
  const { result, steps } = await stepEvents({ async: {} }, 3, 960);
  assert.equal(steps.length, 3 * 40);
  assert.ok(
    steps.every((s) => Number.isInteger(s.staleness) && s.staleness! >= 0 && s.staleness! < 3 * 40),
    'staleness is a version difference',
  );
  assert.ok(result.testAccuracy > 0.4, `test accuracy ${result.testAccuracy} after 120 async updates`);
});

test('async with a staleness bound drops only gradients over the bound', async () => {
  const { steps } = await stepEvents({ async: { maxStaleness: 0 } }, 3);
  for (const s of steps)
    assert.equal(s.dropped, s.staleness! > 0 ? 1 : 0, `staleness ${s.staleness} dropped ${s.dropped}`);
});

test('asynchronous EASGD runs against the centre on the parameter server', async () => {
  const { result, steps } = await stepEvents({ easgd: { mode: 'async', alpha: 0.5, period: 1 } }, 2, 960);
  assert.equal(steps.length, 2 * 60);
  assert.ok(result.testAccuracy > 0.3, `centre's test accuracy ${result.testAccuracy} (chance: 0.1)`);
});
