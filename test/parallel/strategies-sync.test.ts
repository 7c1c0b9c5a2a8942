import { test } from 'node:test';
import assert from 'node:assert/strict';
import { syncStrategy } from '../../src/parallel/strategies/sync.ts';
import { localGroup } from './localGroup.ts';
import { sgdReplica, localParameterServer, stepInfo } from './strategyHarness.ts';

/** Rank r's gradient pulls its weight towards TARGET[r]: g = w − TARGET[r] (depends on the weights it was given). */
const TARGET = [4, 8, 2];

test('sync: devices take turns in rank order, each stepping from the weights the previous one left (sequential SGD)', async () => {
  const comms = localGroup(3);
  const ps = localParameterServer([0]);
  const replicas = [sgdReplica([0]), sgdReplica([0]), sgdReplica([0])];
  const stats: (number | undefined)[] = [];
  // ranks start in reverse order: the turns must still go 0, 1, 2
  await Promise.all(
    [2, 1, 0].map(async (r) => {
      const s = syncStrategy(ps, comms[r]!),
        rep = replicas[r]!;
      for (let step = 0; step < 2; step++) {
        await s.beforeStep!(rep, stepInfo(step, 0.5));
        rep.grads[0] = rep.params[0]! - TARGET[r]!;
        const st = await s.applyUpdate!(rep, stepInfo(step, 0.5));
        stats.push(st ? st.staleness : undefined);
      }
      await s.onFinish!(rep);
    }),
  );
  assert.deepEqual(ps.turns, [0, 1, 2, 0, 1, 2]);
  // w ← w − 0.5·(w − target): 0 → 2 (rank 0) → 5 (rank 1) → 3.5 (rank 2) → 3.75 → 5.875 → 3.9375
  assert.deepEqual(
    ps.pushes.map((p) => p.grads[0]),
    [-4, -6, 3, -0.5, -4.25, 3.875],
  );
  assert.deepEqual([...ps.weights], [3.9375]);
  // each device computes on the newest weights: no staleness
  assert.deepEqual(
    ps.pushes.map((p) => p.computedAt),
    [0, 1, 2, 3, 4, 5],
  );
  assert.deepEqual(stats, [0, 0, 0, 0, 0, 0]);
  // after onFinish every replica holds the final weights
  assert.deepEqual(
    replicas.map((r) => r.params[0]),
    [3.9375, 3.9375, 3.9375],
  );
});

test('sync: a device with an empty slice pushes nothing but still passes the turn', async () => {
  const comms = localGroup(2);
  const ps = localParameterServer([1]);
  await Promise.all(
    comms.map(async (comm, r) => {
      const s = syncStrategy(ps, comm),
        rep = sgdReplica([0]);
      for (let step = 0; step < 2; step++) {
        await s.beforeStep!(rep, stepInfo(step, 1));
        rep.grads[0] = 1;
        // rank 1 has no samples in its second step
        await s.applyUpdate!(rep, stepInfo(step, 1, r === 1 && step === 1 ? 0 : 4));
      }
      await s.onFinish!(rep);
    }),
  );
  assert.deepEqual(ps.turns, [0, 1, 0, 1]);
  assert.equal(ps.pushes.length, 3);
  assert.deepEqual([...ps.weights], [-2]);
});
