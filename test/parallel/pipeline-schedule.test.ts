import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  idealBubble,
  pipelineSchedule,
  simulateSchedule,
  stageOps,
  type PipelineOp,
} from '../../src/parallel/pipeline/schedule.ts';

const shapes: [number, number][] = [];
for (const p of [1, 2, 3, 4, 5, 8]) for (const m of [1, 2, 3, 4, 7, 8, 16]) shapes.push([p, m]);

for (const schedule of ['gpipe', '1f1b'] as const) {
  test(`${schedule}: every stage runs each op once, and only the sends and receives it has neighbours for`, () => {
    for (const [p, m] of shapes) {
      for (let s = 0; s < p; s++) {
        const ops = stageOps(schedule, p, m, s);
        const count = (kind: PipelineOp['kind']) => {
          const micros = ops.filter((o) => o.kind === kind).map((o) => o.micro);
          assert.equal(new Set(micros).size, micros.length, `${schedule} p ${p} m ${m} stage ${s}: ${kind} repeated`);
          return micros.length;
        };
        assert.equal(count('forward'), m);
        assert.equal(count('backward'), m);
        assert.equal(count('recvActivation'), s > 0 ? m : 0);
        assert.equal(count('sendActivation'), s < p - 1 ? m : 0);
        assert.equal(count('recvGradient'), s < p - 1 ? m : 0);
        assert.equal(count('sendGradient'), s > 0 ? m : 0);
        // backwards in micro-batch order: the gradient sums of the unsplit micro-batched step
        const order = ops.filter((o) => o.kind === 'backward').map((o) => o.micro);
        assert.deepEqual(
          order,
          [...order].sort((a, b) => a - b),
        );
      }
    }
  });

  test(`${schedule}: simulated with rendezvous sends, no deadlock, dependencies respected, bubble (p−1)/(m+p−1)`, () => {
    for (const [p, m] of shapes) {
      const sim = simulateSchedule(pipelineSchedule(schedule, p, m));
      assert.ok(Math.abs(sim.bubble - idealBubble(p, m)) < 1e-12, `${schedule} p ${p} m ${m}: bubble ${sim.bubble}`);
      assert.equal(sim.makespan, 2 * (m + p - 1));
      // stage s + 1's forward k starts after stage s's ends; stage s's backward k after stage s + 1's
      for (let s = 0; s + 1 < p; s++) {
        const find = (st: number, kind: string, k: number) =>
          sim.timeline[st]!.find((e) => e.kind === kind && e.micro === k)!;
        for (let k = 0; k < m; k++) {
          assert.ok(find(s + 1, 'forward', k).start >= find(s, 'forward', k).end);
          assert.ok(find(s, 'backward', k).start >= find(s + 1, 'backward', k).end);
        }
      }
      for (const [s, held] of sim.peakInFlight.entries())
        assert.equal(held, schedule === 'gpipe' ? m : Math.min(p - s, m), `${schedule} p ${p} m ${m} stage ${s}`);
    }
  });

  test(`${schedule}: unequal op times (backward twice a forward) still run without deadlock`, () => {
    for (const [p, m] of shapes) {
      const sim = simulateSchedule(pipelineSchedule(schedule, p, m), 1, 2);
      // a stage computes 3m units; the first forward and the last backward wait (p − 1) ops each way
      assert.equal(sim.makespan, 3 * m + 3 * (p - 1));
    }
  });
}

test('the simulator catches a schedule that deadlocks or runs an op too early', () => {
  // both stages receive before they send: neither send is ever reached
  const cross: PipelineOp[][] = [
    [
      { kind: 'recvGradient', micro: 0 },
      { kind: 'forward', micro: 0 },
      { kind: 'sendActivation', micro: 0 },
    ],
    [
      { kind: 'recvActivation', micro: 0 },
      { kind: 'forward', micro: 0 },
      { kind: 'backward', micro: 0 },
    ],
  ];
  assert.throws(() => simulateSchedule(cross), /deadlocks: stage 0 at recvGradient 0, stage 1 at recvActivation 0/);
  assert.throws(() => simulateSchedule([[{ kind: 'backward', micro: 0 }]]), /backward 0 before its forward/);
  // a naive 1F1B (send right after each forward, receive right before each backward) deadlocks with rendezvous sends
  const naive = pipelineSchedule('1f1b', 2, 4).map((ops, s) => {
    const compute = ops.filter((o) => o.kind === 'forward' || o.kind === 'backward');
    return compute.flatMap((o): PipelineOp[] =>
      o.kind === 'forward'
        ? s === 0
          ? [o, { kind: 'sendActivation', micro: o.micro }]
          : [{ kind: 'recvActivation', micro: o.micro }, o]
        : s === 0
          ? [{ kind: 'recvGradient', micro: o.micro }, o]
          : [o, { kind: 'sendGradient', micro: o.micro }],
    );
  });
  assert.throws(() => simulateSchedule(naive), /deadlocks/);
});

test('bad shapes are refused with the field named', () => {
  assert.throws(() => stageOps('gpipe', 0, 4, 0), /stages must be a positive integer, got 0/);
  assert.throws(() => stageOps('1f1b', 2, 0, 0), /microBatches must be a positive integer, got 0/);
  assert.throws(() => stageOps('1f1b', 2, 4, 2), /stage 2 is not one of 0 … 1/);
});
