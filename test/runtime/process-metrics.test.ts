/** A job's process other than 0 records its devices' events in metrics.process-<P>.jsonl, opened at the first step. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { tmpDir } from '../cli/helpers.ts';
import { ProcessMetrics, processMetricsFile } from '../../src/runtime/events/processMetrics.ts';
import { readMetrics } from '../../src/runtime/events/metrics.ts';

test("events before the first step wait for it (the run directory is process 0's to make), keeping their times", () => {
  const dir = join(tmpDir(), 'run');
  const m = new ProcessMetrics(dir, 2, true);
  m.write({ type: 'start', devices: 4 });
  assert.equal(existsSync(dir), false, 'nothing is made before the first step');
  m.write({ type: 'step', rank: 2, step: 0 });
  m.write({ type: 'end', seconds: 1 });
  m.close();
  m.write({ type: 'step', rank: 2, step: 1 });
  const events = readMetrics(join(dir, processMetricsFile(2)));
  assert.deepEqual(
    events.map((e) => e.type),
    ['start', 'step', 'end'],
  );
  assert.ok(events[0]!.time <= events[1]!.time);
});

test('--force starts the file afresh; a resumed run appends; no step, no file', () => {
  const dir = tmpDir();
  writeFileSync(join(dir, processMetricsFile(1)), '{"type":"step","time":1,"rank":1,"step":0,"loss":1}\n');
  const resumed = new ProcessMetrics(dir, 1, false);
  resumed.write({ type: 'step', rank: 1, step: 1 });
  resumed.close();
  assert.equal(readMetrics(join(dir, processMetricsFile(1))).length, 2);
  const forced = new ProcessMetrics(dir, 1, true);
  forced.write({ type: 'step', rank: 1, step: 0 });
  forced.close();
  assert.equal(readMetrics(join(dir, processMetricsFile(1))).length, 1);
  const idle = new ProcessMetrics(dir, 3, true);
  idle.write({ type: 'start' });
  idle.close();
  assert.equal(existsSync(join(dir, processMetricsFile(3))), false);
});
