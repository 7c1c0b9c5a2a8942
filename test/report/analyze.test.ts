import { test } from 'node:test';
import assert from 'node:assert/strict';
import { appendFileSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  downsample,
  findStragglers,
  loadRun,
  runLabels,
  series,
  summarize,
  formatTable,
  MAX_SERIES_POINTS,
} from '../../src/report/index.ts';
import { tmpDir, writeSyntheticRun } from './helpers.ts';

test('stragglers: compute per sample ≥ 1.5× the (lower) median', () => {
  assert.deepEqual(findStragglers([1, 1, 1, 3]), [false, false, false, true]);
  assert.deepEqual(findStragglers([1, 2]), [false, true], 'two devices: the slower is compared with the faster');
  assert.deepEqual(findStragglers([1, 1.4]), [false, false]);
  assert.deepEqual(findStragglers([1, 1.1, 0.9, 1.2]), [false, false, false, false]);
  assert.deepEqual(findStragglers([5]), [false], 'one device: nothing to compare');
  assert.deepEqual(findStragglers([NaN, 1, 4]), [false, false, true], 'devices without data are skipped');
});

test('downsample: bucket means, at most maxPoints, short series untouched', () => {
  assert.deepEqual(downsample([[1, 2, 3]], 5), [[1, 2, 3]]);
  const xs = Array.from({ length: 10 }, (_, i) => i);
  assert.deepEqual(downsample([xs, xs.map((x) => 2 * x)], 5), [
    [0.5, 2.5, 4.5, 6.5, 8.5],
    [1, 5, 9, 13, 17],
  ]);
  assert.deepEqual(downsample([[1, NaN, NaN, NaN]], 2), [[1, NaN]]);
  const long = Array.from({ length: 12_345 }, (_, i) => i);
  assert.ok(downsample([long], 2000)[0]!.length <= 2000);
});

test('a synthetic run is summarised: accuracy, idle share, stragglers, bytes, memory', () => {
  const dir = tmpDir();
  try {
    writeSyntheticRun(join(dir, 'hybrid'), { strategy: 'hybrid', devices: 4, slow: { 2: 3 } });
    const run = loadRun(join(dir, 'hybrid'));
    const s = summarize(run);
    assert.equal(s.strategy, 'hybrid');
    assert.equal(s.devices, 4);
    assert.equal(s.finished, true);
    assert.equal(s.testAccuracy, 0.75);
    assert.deepEqual(
      s.perDevice.map((d) => d.straggler),
      [false, false, true, false],
    );
    // fast devices: 10 compute, 2 comm, 20 idle; the straggler: 30 compute, 2 comm, 0 idle
    assert.ok(Math.abs(s.idleShare - (3 * 20) / (3 * 32 + 32)) < 1e-9, `idle share ${s.idleShare}`);
    assert.equal(s.meanStaleness, null);
    assert.equal(s.bytes, 4 * 100 * 2 * 1234 * 4);
    assert.equal(s.maxRssBytes, 300 * 2 ** 20);
    const table = formatTable([{ label: 'hybrid ×4', summary: s }]);
    assert.match(table, /^strategy +devices +test accuracy/);
    assert.match(table, /hybrid +4 +75\.00%/);
    assert.match(table, /device 2/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('series: steps of all devices combined per step, long runs downsampled, staleness histogram for async', () => {
  const dir = tmpDir();
  try {
    writeSyntheticRun(join(dir, 'async'), { strategy: 'async', devices: 2, epochs: 3, stepsPerEpoch: 1500 });
    const run = loadRun(join(dir, 'async'));
    const s = series(run);
    assert.ok(
      s.steps.step.length <= MAX_SERIES_POINTS && s.steps.step.length >= MAX_SERIES_POINTS / 2,
      `${s.steps.step.length} points`,
    );
    assert.equal(s.steps.merged, 3);
    assert.equal(s.steps.step.length, s.steps.loss.length);
    assert.ok(
      s.steps.time.every((t, i) => i === 0 || t >= s.steps.time[i - 1]!),
      'time increases',
    );
    assert.deepEqual(s.staleness!.counts, [3000, 3000, 3000]);
    assert.equal(summarize(run).meanStaleness, 1);
    assert.equal(s.timeline.length, 2);
    for (const row of s.timeline) {
      assert.ok(row.segments.length / 3 <= 3 * 300, 'timeline merged');
      for (let i = 0; i < row.segments.length; i += 3) assert.ok(row.segments[i + 1]! >= row.segments[i]!);
    }
    assert.ok(s.throughput.time.length > 10 && s.throughput.samplesPerSecond.every((x) => x !== null && x > 0));
    assert.equal(s.evals.length, 3);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('labels: strategy and devices, the directory name only when it adds something', () => {
  const dir = tmpDir();
  try {
    writeSyntheticRun(join(dir, 'a', 'hybrid'), { strategy: 'hybrid' });
    writeSyntheticRun(join(dir, 'b', 'hybrid'), { strategy: 'hybrid' });
    writeSyntheticRun(join(dir, 'async'), { strategy: 'async' });
    writeSyntheticRun(join(dir, 'run-7'), { strategy: 'bsp', devices: 4 });
    const runs = ['a/hybrid', 'b/hybrid', 'async', 'run-7'].map((d) => loadRun(join(dir, d)));
    assert.deepEqual(runLabels(runs), ['hybrid ×2 (a/hybrid)', 'hybrid ×2 (b/hybrid)', 'async ×2', 'bsp ×4 (run-7)']);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('an unfinished run (no end event) is still reported, from its last event', () => {
  const dir = tmpDir();
  try {
    writeSyntheticRun(dir, { unfinished: true });
    const s = summarize(loadRun(dir));
    assert.equal(s.finished, false);
    assert.equal(s.testAccuracy, 0.75, 'the last evaluation');
    assert.ok(s.wallSeconds > 0 && s.samplesPerSecond > 0);
    assert.equal(s.maxRssBytes, null);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('bad run directories give one clear line naming the directory or file', () => {
  const dir = tmpDir();
  try {
    assert.throws(() => loadRun(join(dir, 'nope')), { message: `run directory ${join(dir, 'nope')} does not exist` });
    mkdirSync(join(dir, 'empty'));
    assert.throws(() => loadRun(join(dir, 'empty')), {
      message: `run directory ${join(dir, 'empty')} has no metrics.jsonl; is it a paratrain run directory?`,
    });
    writeFileSync(join(dir, 'file'), 'x');
    assert.throws(() => loadRun(join(dir, 'file')), /is not a run directory/);
    const path = writeSyntheticRun(join(dir, 'corrupt'));
    appendFileSync(path, '{"type":"step", oops\n{"type":"end"}\n');
    assert.throws(
      () => loadRun(join(dir, 'corrupt')),
      (e: Error) =>
        e.message.startsWith(`metrics file ${path}: line `) &&
        e.message.includes('not valid JSON') &&
        !e.message.includes('\n'),
    );
    mkdirSync(join(dir, 'nostart'));
    writeFileSync(join(dir, 'nostart', 'metrics.jsonl'), '{"type":"step","time":1}\n');
    assert.throws(() => loadRun(join(dir, 'nostart')), /metrics file .*nostart.metrics\.jsonl has no 'start' event/);
    mkdirSync(join(dir, 'badstep'));
    writeFileSync(
      join(dir, 'badstep', 'metrics.jsonl'),
      '{"type":"start","time":1}\n{"type":"step","time":2,"rank":"zero","step":0,"loss":1}\n',
    );
    assert.throws(() => loadRun(join(dir, 'badstep')), /step event #1 has no numeric 'rank' \(got "zero"\)/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
