import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parseRun } from '../../src/report/runData.ts';
import type { MetricEvent } from '../../src/runtime/events/metrics.ts';

const start = (time: number): MetricEvent => ({
  type: 'start',
  time,
  devices: 1,
  processes: 1,
  strategy: 'single device',
  epochs: 2,
  stepsPerEpoch: 4,
  globalBatch: 8,
});
const step = (time: number, n: number): MetricEvent => ({
  type: 'step',
  time,
  rank: 0,
  epoch: Math.floor(n / 4),
  step: n,
  loss: 1,
  accuracy: 0.5,
  samples: 8,
});

test("a resumed run: the report keeps the first attempt's steps before the resume point, then the resumed ones", () => {
  const events: MetricEvent[] = [
    start(0),
    ...[0, 1, 2, 3, 4, 5].map((n) => step(10 + n, n)),
    { type: 'checkpoint', time: 20, epoch: 0, step: 4, path: 'x' },
    start(100),
    { type: 'resume', time: 101, step: 4, epoch: 1, fromDevices: 2, devices: 1, checkpoint: 'x' },
    ...[4, 5, 6, 7].map((n) => step(110 + n, n)),
    { type: 'end', time: 200, seconds: 1, samplesPerSecond: 1, testAccuracy: 0.5, testLoss: 1 },
  ];
  const run = parseRun(events, { dir: 'd', metricsPath: 'd/metrics.jsonl', name: 'd' });
  assert.deepEqual(
    run.steps.map((s) => s.step),
    [0, 1, 2, 3, 4, 5, 6, 7],
  );
  assert.deepEqual(
    run.steps.map((s) => s.time),
    [10, 11, 12, 13, 114, 115, 116, 117],
  );
  assert.ok(run.end);
});
