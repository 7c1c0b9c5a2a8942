/**
 * A real run killed, resumed, and resumed again with more epochs once finished: its report is one
 * timeline of three segments, the summary adds them up, and the stretched schedule is noted.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, rmSync } from 'node:fs';
import { dirname } from 'node:path';
import { tinyConfig } from '../parallel/helpers.ts';
import { train } from '../../src/runtime/run/train.ts';
import { readMetrics } from '../../src/runtime/events/metrics.ts';
import { loadReportRuns, summaryTable, writeReport } from '../../src/report/index.ts';
import { freshDir } from '../runtime/resumeHelpers.ts';

test('killed, resumed, then resumed with more epochs: one report timeline of three segments', async () => {
  const config = tinyConfig({ train: { epochs: 1, devices: 2, strategy: 'hybrid', checkpointEvery: { steps: 2 } } });
  const runDir = freshDir();
  try {
    await assert.rejects(train(config, { out: runDir, failAt: { rank: 0, step: 4 } }), /injected failure/);
    await train(config, { resume: runDir });
    await train({ ...config, train: { ...config.train, epochs: 2 } }, { resume: runDir });

    const [report] = loadReportRuns([runDir]);
    const { run, summary, series } = report!;
    assert.equal(run.segments.length, 3);
    assert.deepEqual(
      run.segments.map((s) => s.ended),
      ['killed', 'end', 'end'],
    );
    const stretch = run.segments[2]!.resume!;
    assert.equal(stretch.scheduleFinished, true, 'the last resume continued a finished run');
    assert.deepEqual([stretch.epochsBefore, stretch.epochsAfter], [1, 2]);

    // the wall-time axis: monotone, non-negative, each segment after the previous one
    const times = series.steps.time;
    assert.ok(
      times.every((t, i) => t >= 0 && (i === 0 || t >= times[i - 1]!)),
      `step times ${times.join(', ')}`,
    );
    assert.equal(series.steps.breaks.length, 2, 'the curves break at both resumes');
    assert.equal(series.resumes.length, 2);
    assert.equal(series.throughput.samplesPerSecond.filter((v) => v === null).length, 2, 'two gaps in throughput');
    // (a run this short reports its steps in bursts: some windows hold none, so zeros are real here)
    assert.ok(series.throughput.samplesPerSecond.every((v) => v === null || v >= 0));
    assert.ok(series.throughput.time.every((t, i) => i === 0 || t >= series.throughput.time[i - 1]!));
    // every step of the run, once: the killed segment's steps past its last set were redone
    const stepsPerEpoch = readMetrics(`${runDir}/metrics.jsonl`).find((e) => e.type === 'start')!.stepsPerEpoch;
    assert.deepEqual(
      series.steps.step,
      Array.from({ length: 2 * (stepsPerEpoch as number) }, (_, i) => i),
    );
    // the device timeline: bars of both devices in each segment
    const marks = [0, ...series.resumes.map((r) => r.time), Infinity];
    for (const row of series.timeline) {
      const starts = row.segments.filter((_, i) => i % 3 === 0);
      for (let k = 0; k < 3; k++)
        assert.ok(
          starts.some((t) => t >= marks[k]! && t < marks[k + 1]!),
          `device ${row.rank} has bars in segment ${k + 1}`,
        );
    }

    // the summary: the segments added up
    const seconds = run.segments.reduce((n, s) => n + s.seconds, 0);
    assert.ok(Math.abs(summary.wallSeconds - seconds) < 1e-9);
    assert.ok(summary.elapsedSeconds >= summary.wallSeconds);
    const globalBatch = run.start.globalBatch;
    for (const s of run.segments.slice(1))
      assert.ok(
        Math.abs(s.samples - (s.lastStep - s.firstStep + 1) * globalBatch) < 1e-6,
        `an ended segment's samples are its steps' (${s.samples})`,
      );
    assert.ok(Math.abs(summary.samplesPerSecond - summary.samples / summary.wallSeconds) < 1e-6);
    assert.match(summaryTable([report!]), /3 segments/);

    const html = readFileSync(writeReport([report!]), 'utf8');
    assert.ok(html.includes('train.epochs 1 → 2 stretched it'), 'the stretched schedule is noted');
  } finally {
    rmSync(dirname(runDir), { recursive: true, force: true });
  }
});
