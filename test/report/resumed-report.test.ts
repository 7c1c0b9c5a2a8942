/**
 * The report of a run stopped and resumed is one timeline: each segment after the previous one on
 * the wall-time axis, the gap between them a break in the lines (not zero throughput), the summary's
 * times and samples the sums of the segments, and the device timeline showing every segment.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, rmSync, writeFileSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { formatTable, loadReportRuns, parseRun, series, summarize, writeReport } from '../../src/report/index.ts';
import { tmpDir, writeSyntheticRun } from './helpers.ts';
import { BATCH, resumedRunEvents, segmentEnds } from './resumedRun.ts';

const T0 = 1_700_000_000_000;
const HOUR = 3_600_000;
const where = { dir: 'run', metricsPath: 'run/metrics.jsonl', name: 'run' };
const close = (a: number, b: number, what: string) => assert.ok(Math.abs(a - b) < 1e-6, `${what}: ${a} ≠ ${b}`);

/** Killed after step 13 (sets at 5 and 10), resumed an hour later from step 10 to the end of epoch 2. */
const crashed = () =>
  resumedRunEvents([
    { startTime: T0, epochs: 2, fromStep: 0, killedAfter: 13 },
    { startTime: T0 + HOUR, epochs: 2, fromStep: 10 },
  ]);

test('a resumed run is one timeline: monotone, non-negative wall time, each segment after the previous one', () => {
  const events = crashed();
  const run = parseRun(events, where);
  const ends = segmentEnds(events);
  const first = (ends[0]! - T0) / 1000;
  assert.equal(run.segments.length, 2);
  close(run.segments[0]!.seconds, first, 'the killed segment ran to its last event');
  const s = series(run);
  const times = s.steps.time;
  assert.ok(
    times.every((t, i) => t >= 0 && (i === 0 || t >= times[i - 1]!)),
    `step times: ${times.join(', ')}`,
  );
  const at10 = s.steps.step.indexOf(10);
  assert.ok(times[at10 - 1]! <= first && times[at10]! > first, 'the second segment starts after the first ended');
  assert.ok(times.at(-1)! <= run.segments[0]!.seconds + run.segments[1]!.seconds + 1e-9, 'the gap is not on the axis');
  assert.deepEqual(s.steps.breaks, [at10], 'the curves break where the second segment begins');
  for (const e of s.evals) assert.ok(e.time >= 0);
  assert.ok(s.evals.every((e, i) => i === 0 || e.time >= s.evals[i - 1]!.time));
  assert.deepEqual(
    s.resumes.map((r) => ({ ...r, time: Math.round(r.time * 1000), gapSeconds: Math.round(r.gapSeconds) })),
    [{ time: ends[0]! - T0, step: 10, gapSeconds: Math.round((T0 + HOUR - ends[0]!) / 1000) }],
    'the resume is marked where the second segment starts, with the gap it bridges',
  );
});

test('the gap is a gap: throughput breaks (a null point) between segments, never drops to zero', () => {
  const run = parseRun(crashed(), where);
  const { time, samplesPerSecond } = series(run).throughput;
  const gaps = samplesPerSecond.flatMap((v, i) => (v === null ? [i] : []));
  assert.equal(gaps.length, 1, 'one break, between the two segments');
  const gap = gaps[0]!;
  close(time[gap]!, run.segments[0]!.seconds, 'the break sits at the resume');
  assert.ok(
    samplesPerSecond.every((v) => v === null || v > 0),
    `no zero throughput: ${samplesPerSecond.join(', ')}`,
  );
  assert.ok(gap > 2 && gap < samplesPerSecond.length - 3, 'both segments have a curve');
  assert.ok(time.every((t, i) => t >= 0 && (i === 0 || t >= time[i - 1]!)));
});

test('the summary adds up the segments: training time, elapsed time with the gap, samples, samples/s', () => {
  const events = crashed();
  const run = parseRun(events, where);
  const ends = segmentEnds(events);
  const s = summarize(run);
  const training = (ends[0]! - T0 + ends[1]! - (T0 + HOUR)) / 1000;
  close(s.wallSeconds, training, 'training wall time: both segments');
  close(s.elapsedSeconds, (ends[1]! - T0) / 1000, 'elapsed: from the first start to the last event');
  assert.equal(s.segments, 2);
  // the killed segment trained steps 0–13 (10–13 again after the resume), the resumed one 10–19
  assert.equal(s.samples, (14 + 10) * BATCH * 2);
  close(s.samplesPerSecond, s.samples / s.wallSeconds, 'samples/s over the training time');
  const table = formatTable([{ label: 'hybrid ×2', summary: s }]);
  assert.match(table, /wall time +samples\/s .*elapsed/);
  assert.match(table, /\d\.\d s, 2 segments +\d+ .* 1h00m/, table);
});

test('the device timeline shows every segment, each device', () => {
  const run = parseRun(crashed(), where);
  const { timeline } = series(run);
  const boundary = run.segments[0]!.seconds;
  assert.equal(timeline.length, 2);
  for (const row of timeline) {
    const starts = row.segments.filter((_, i) => i % 3 === 0);
    assert.ok(
      starts.every((t, i) => t >= 0 && (i === 0 || t >= starts[i - 1]!)),
      `device ${row.rank}: bars in order`,
    );
    assert.ok(
      starts.some((t) => t < boundary),
      `device ${row.rank}: bars in the first segment`,
    );
    assert.ok(
      starts.some((t) => t > boundary),
      `device ${row.rank}: bars in the second segment`,
    );
  }
});

test('a resume that stretches a finished schedule is noted in the report', () => {
  const dir = tmpDir();
  try {
    const events = resumedRunEvents([
      { startTime: T0, epochs: 1, fromStep: 0 },
      { startTime: T0 + 600_000, epochs: 2, fromStep: 10 },
    ]);
    mkdirSync(join(dir, 'stretched'));
    writeFileSync(join(dir, 'stretched', 'metrics.jsonl'), `${events.map((e) => JSON.stringify(e)).join('\n')}\n`);
    const [report] = loadReportRuns([join(dir, 'stretched')]);
    assert.deepEqual(report!.run.segments[1]!.resume, {
      step: 10,
      epoch: 1,
      fromDevices: 2,
      devices: 2,
      checkpoint: 'run/checkpoints/step-00000010',
      epochsBefore: 1,
      epochsAfter: 2,
      scheduleFinished: true,
    });
    assert.equal(report!.run.segments[0]!.resume, null);
    const html = readFileSync(writeReport([report!]), 'utf8');
    // (ok, not match: a failure would print the whole report)
    assert.ok(
      /resumed at step 10 \(epoch 2\) after the run had finished its schedule of 1 epoch: train\.epochs 1 → 2 stretched it/.test(
        html,
      ),
      'the stretched schedule is noted',
    );
    assert.ok(/2 segments/.test(html), 'the segments are counted');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('comparing a resumed run with one that was not: both overlaid from 0, the table says which was resumed', () => {
  const dir = tmpDir();
  try {
    mkdirSync(join(dir, 'resumed'));
    writeFileSync(
      join(dir, 'resumed', 'metrics.jsonl'),
      `${crashed()
        .map((e) => JSON.stringify(e))
        .join('\n')}\n`,
    );
    // started a minute after the resumed run first started, long before it was resumed
    writeSyntheticRun(join(dir, 'straight'), { strategy: 'bsp', devices: 2, epochs: 2, startTime: T0 + 60_000 });
    // the folder stands for its runs, in the order they first started (as for a folder compare wrote)
    const runs = loadReportRuns([dir]);
    assert.deepEqual(
      runs.map((r) => r.summary.segments),
      [2, 1],
    );
    for (const r of runs) assert.ok(r.series.steps.time.every((t) => t >= 0));
    assert.deepEqual(runs[1]!.series.resumes, []);
    const html = readFileSync(writeReport(runs), 'utf8');
    assert.ok(html.includes('<th>elapsed</th>'), 'the elapsed column, for the resumed run');
    const table = formatTable(runs.map((r) => ({ label: r.label, summary: r.summary })));
    assert.equal(table.trim().split('\n').length, 4);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
