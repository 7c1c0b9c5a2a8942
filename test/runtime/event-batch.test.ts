import { test } from 'node:test';
import assert from 'node:assert/strict';
import { StepEventBatcher } from '../../src/runtime/events/eventBatch.ts';
import type { TrainEvent } from '../../src/runtime/events/events.ts';

const step = (n: number): TrainEvent => ({
  type: 'step',
  rank: 0,
  epoch: 0,
  step: n,
  stepInEpoch: n,
  stepsPerEpoch: 100,
  loss: 1,
  accuracy: 0,
  lr: 0.1,
  samples: 8,
  computeMs: 1,
  syncMs: 0,
  idleMs: 0,
  bytes: 0,
});

test('step events wait for the interval; any other event sends them first, in order', () => {
  const sent: TrainEvent[][] = [];
  const b = new StepEventBatcher((events) => sent.push(events), 60_000);
  b.emit(step(0));
  b.emit(step(1));
  assert.equal(sent.length, 0, 'steps are held within the interval');
  b.emit({
    type: 'stall',
    waiter: 'device 0',
    waitedMs: 5,
    lateDevices: [],
    description: 'x',
  } as unknown as TrainEvent);
  assert.equal(sent.length, 1);
  assert.deepEqual(
    sent[0]!.map((e) => (e.type === 'step' ? e.step : e.type)),
    [0, 1, 'stall'],
  );
  b.emit(step(2));
  b.flush();
  b.flush();
  assert.deepEqual(
    sent.map((s) => s.length),
    [3, 1],
    'flush sends what is held, and nothing when empty',
  );
});

test('each step carries the time it was emitted; an interval of 0 sends every step at once', () => {
  const sent: TrainEvent[][] = [];
  const b = new StepEventBatcher((events) => sent.push(events), 0);
  const before = Date.now();
  b.emit(step(7));
  assert.equal(sent.length, 1);
  const e = sent[0]![0]!;
  assert.ok(e.type === 'step' && e.time !== undefined && e.time >= before && e.time <= Date.now());
});

test("a pipeline stage's sampled timeline waits with the steps instead of waking the main thread", () => {
  const sent: TrainEvent[][] = [];
  const b = new StepEventBatcher((events) => sent.push(events), 60_000);
  b.emit(step(1));
  b.emit({
    type: 'pipelineTimeline',
    rank: 0,
    step: 1,
    stage: 0,
    stages: 2,
    pipeline: 0,
    schedule: '1f1b',
    microBatches: 1,
    origin: 0,
    ops: [],
  });
  assert.equal(sent.length, 0);
  b.flush();
  assert.deepEqual(
    sent[0]!.map((e) => e.type),
    ['step', 'pipelineTimeline'],
  );
});
