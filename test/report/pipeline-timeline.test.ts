import { test } from 'node:test';
import assert from 'node:assert/strict';
import { idealBubble, pipelineSchedule, simulateSchedule } from '../../src/parallel/pipeline/schedule.ts';
import type { StageTimeline } from '../../src/parallel/pipeline/timeline.ts';
import {
  completeSteps,
  measuredBubble,
  parseStageTimeline,
  pipelineSection,
  timelineSvg,
} from '../../src/report/pipelineTimeline.ts';
import { parseRun } from '../../src/report/runData.ts';
import type { MetricEvent } from '../../src/runtime/events/metrics.ts';

/** A step's stages as the simulator runs the schedule (forward 1 ms, backward 2 ms), each stage on its own origin. */
function simulated(schedule: 'gpipe' | '1f1b', p: number, m: number, step = 1): StageTimeline[] {
  const sim = simulateSchedule(pipelineSchedule(schedule, p, m), 1, 2);
  return sim.timeline.map((ops, s) => {
    // each stage's times relative to its own first op, as the stages record them
    const origin = 1_700_000_000_000 + ops[0]!.start;
    return {
      step,
      stage: s,
      stages: p,
      pipeline: 0,
      schedule,
      microBatches: m,
      origin,
      ops: ops.map((o) => ({ ...o, start: o.start - ops[0]!.start, end: o.end - ops[0]!.start })),
    };
  });
}

/** The compute boxes of the SVG, in document order: [stage, kind, micro, x]. */
function boxes(svg: string): [number, string, number, number][] {
  return [...svg.matchAll(/<g data-stage="(\d+)" data-kind="(\w+)" data-micro="(\d+)">.*?<rect x="([\d.]+)"/g)].map(
    (g) => [Number(g[1]), g[2]!, Number(g[3]), Number(g[4])],
  );
}

test('the timeline draws every forward and backward in its stage row, in the order the stage ran them, left to right', () => {
  for (const schedule of ['gpipe', '1f1b'] as const) {
    const step = simulated(schedule, 3, 4);
    const svg = timelineSvg(step);
    const drawn = boxes(svg);
    assert.equal(drawn.length, 3 * 4 * 2, schedule);
    for (const t of step) {
      const row = drawn.filter((b) => b[0] === t.stage);
      assert.deepEqual(
        row.map((b) => `${b[1]}${b[2]}`),
        t.ops.map((o) => `${o.kind}${o.micro}`),
        `${schedule} stage ${t.stage}`,
      );
      for (let i = 1; i < row.length; i++) assert.ok(row[i]![3] >= row[i - 1]![3], `${schedule}: boxes left to right`);
      // each row's y is its stage's: rows top to bottom
      const ys = [
        ...svg.matchAll(
          new RegExp(
            `data-stage="${t.stage}" data-kind="\\w+" data-micro="\\d+"><title>[^<]*</title><rect x="[\\d.]+" y="(\\d+)"`,
            'g',
          ),
        ),
      ];
      assert.ok(
        ys.every((y) => Number(y[1]) === 6 + t.stage * 34),
        `${schedule}: stage ${t.stage}'s row`,
      );
    }
    // stage 1 starts after stage 0's first forward: its idle start is a gap, the box starts to the right
    const firstOf = (s: number) => drawn.find((b) => b[0] === s)![3];
    assert.ok(firstOf(1) > firstOf(0) && firstOf(2) > firstOf(1));
    assert.match(svg, /<title>stage 2: backward of micro-batch 3, /);
  }
});

test("the measured bubble of a simulated schedule is the schedule's own, beside the ideal (p − 1)/(m + p − 1)", () => {
  const sim = simulateSchedule(pipelineSchedule('1f1b', 4, 8), 1, 2);
  const step = simulated('1f1b', 4, 8);
  assert.ok(Math.abs(measuredBubble(step) - sim.bubble) < 1e-9);
  assert.ok(Math.abs(measuredBubble(step) - idealBubble(4, 8)) < 1e-9);
  const html = pipelineSection([{ label: 'hybrid ×4', color: '#4e79a7', timelines: step }]);
  assert.match(html, /id="chart-pipeline"/);
  assert.match(html, /measured bubble <b>27\.3%<\/b>, ideal \(p − 1\)\/\(m \+ p − 1\) = 27\.3%/);
  assert.match(html, /step 1, 4 stages, 8 micro-batches, 1f1b/);
});

test('the chart shows the last sampled step every stage reported, with the mean bubble over the sampled steps', () => {
  const early = simulated('gpipe', 2, 4, 1),
    late = simulated('gpipe', 2, 4, 101);
  // step 201 misses stage 1 (the run was killed): not drawn
  const partial = simulated('gpipe', 2, 4, 201).slice(0, 1);
  assert.deepEqual(
    completeSteps([...early, ...late, ...partial]).map((s) => s[0]!.step),
    [1, 101],
  );
  const html = pipelineSection([{ label: 'run', color: '#000', timelines: [...early, ...late, ...partial] }]);
  assert.match(html, /step 101, 2 stages/);
  assert.match(html, /mean over the 2 sampled steps/);
  assert.equal(pipelineSection([{ label: 'run', color: '#000', timelines: partial }]), '');
});

test("a run's pipelineTimeline events reach RunData; malformed ones are left out; an unpipelined run has none", () => {
  const start: MetricEvent = { type: 'start', time: 1, devices: 2, strategy: 'hybrid', stepsPerEpoch: 4, epochs: 1 };
  const events = simulated('1f1b', 2, 2).map((t, s) => ({ type: 'pipelineTimeline', time: 2, rank: s, ...t }));
  const where = { dir: 'd', metricsPath: 'd/metrics.jsonl', name: 'd' };
  const run = parseRun([start, ...events, { type: 'pipelineTimeline', time: 3, step: 'x' }], where);
  assert.equal(run.pipeline?.length, 2);
  assert.deepEqual(run.pipeline?.[1], events[1] && parseStageTimeline(events[1]));
  assert.equal(
    parseStageTimeline({ type: 'pipelineTimeline', time: 3, ...simulated('1f1b', 2, 2)[0]!, ops: [{ kind: 'jump' }] }),
    null,
  );
  assert.equal(parseRun([start], where).pipeline, undefined);
});
