import { test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { train } from '../../src/runtime/run/train.ts';
import { readMetrics } from '../../src/runtime/events/metrics.ts';
import { timelineSampled } from '../../src/parallel/pipeline/timeline.ts';
import { loadReportRuns } from '../../src/report/index.ts';
import { renderHtml } from '../../src/report/html.ts';
import { tinyConfig } from './helpers.ts';
import { freshDir } from '../runtime/resumeHelpers.ts';

// 2 stages on 2 device threads, 4 micro-batches of 2 samples, 4 steps: step 1 is sampled
const config = tinyConfig({
  layers: [{ flatten: {} }, { dense: { units: 16, activation: 'relu' } }, { dense: { units: 10 } }],
  optimizer: { adam: { lr: 0.003 } },
  train: {
    devices: 2,
    strategy: 'hybrid',
    microBatches: 4,
    backend: 'wasm',
    pipeline: { stages: 2, schedule: '1f1b' },
  },
  data: { trainLimit: 32, testLimit: 16 },
});

test("a pipelined run records every stage's forward and backward of every micro-batch in its sampled step, and its report draws them", async () => {
  const runDir = freshDir();
  await train(config, { out: runDir });
  const events = readMetrics(join(runDir, 'metrics.jsonl'));
  const timelines = events.filter((e) => e.type === 'pipelineTimeline');
  const steps = events.filter((e) => e.type === 'step').map((e) => e.step as number);
  assert.deepEqual(
    [...new Set(timelines.map((e) => e.step))],
    [...new Set(steps)].filter(timelineSampled),
    'one timeline per sampled step',
  );
  assert.deepEqual(timelines.map((e) => e.stage).sort(), [0, 1], 'every stage (threads) reports its own');
  const origins = timelines.map((e) => e.origin as number);
  // one clock for both threads: the stages' origins lie within the step, not a thread's lifetime apart
  assert.ok(Math.abs(origins[0]! - origins[1]!) < 1000, `origins ${origins}`);
  for (const e of timelines) {
    assert.equal(e.rank, e.stage);
    assert.equal(e.microBatches, 4);
    assert.equal(e.stages, 2);
    assert.equal(e.schedule, '1f1b');
    const ops = e.ops as { kind: string; micro: number; start: number; end: number }[];
    for (let k = 0; k < 4; k++) {
      const f = ops.findIndex((o) => o.kind === 'forward' && o.micro === k),
        b = ops.findIndex((o) => o.kind === 'backward' && o.micro === k);
      assert.ok(f >= 0 && b > f, `stage ${e.stage}: forward ${k} before backward ${k}`);
      assert.ok(ops[f]!.end <= ops[b]!.start, `stage ${e.stage}: forward ${k} ends before backward ${k} starts`);
    }
    for (const o of ops) assert.ok(o.start >= 0 && o.end >= o.start);
    // stage 1 waits for its activations: its receives are in its timeline
    if (e.stage === 1) assert.ok(ops.some((o) => o.kind === 'recvActivation'));
  }
  const html = renderHtml(loadReportRuns([runDir]));
  assert.match(html, /<section class="chart wide" id="chart-pipeline">/);
  assert.doesNotMatch(html, /https?:\/\//i, 'the chart keeps the report free of addresses');
  assert.match(html, /measured bubble <b>\d+\.\d%<\/b>, ideal \(p − 1\)\/\(m \+ p − 1\) = 20\.0%/);
  for (const s of [0, 1])
    for (let k = 0; k < 4; k++)
      for (const kind of ['forward', 'backward'])
        assert.match(html, new RegExp(`data-stage="${s}" data-kind="${kind}" data-micro="${k}"`));
});
