import { test } from 'node:test';
import assert from 'node:assert/strict';
import { asyncStrategy, type AsyncOptions } from '../../src/parallel/strategies/async.ts';
import type { Strategy, StrategyStepStats } from '../../src/parallel/strategy.ts';
import { sgdReplica, localParameterServer, stepInfo, type TestReplica } from './strategyHarness.ts';

/** Async devices share only the parameter server: the test drives them one at a time, in a chosen order. */
function devices(count: number, initial: number[], o: AsyncOptions) {
  const ps = localParameterServer(initial, undefined, count);
  const replicas = Array.from({ length: count }, () => sgdReplica(initial.map(() => 99)));
  const strategies = replicas.map(() => asyncStrategy(ps, o));
  const steps = replicas.map(() => 0);
  /** one step of device r with gradient g: beforeStep, then applyUpdate */
  const step = async (r: number, g: number[], lr = 1, samples = 1): Promise<StrategyStepStats | undefined> => {
    const s = strategies[r]!,
      rep = replicas[r]!;
    await s.beforeStep!(rep, stepInfo(steps[r]!, lr, samples));
    rep.grads.set(g);
    return s.applyUpdate!(rep, stepInfo(steps[r]!++, lr, samples));
  };
  const start = () => Promise.all(strategies.map((s, r) => s.onStart!(replicas[r]!)));
  const finish = () => Promise.all(strategies.map((s, r) => s.onFinish!(replicas[r]!)));
  return { ps, replicas, strategies: strategies as Strategy[], step, start, finish };
}

test('async: the server applies each push as it arrives; staleness = server version − version computed on', async () => {
  const d = devices(2, [0], { fetchEvery: 1, pushEvery: 1 });
  await d.start();
  assert.deepEqual(
    d.replicas.map((r) => r.params[0]),
    [0, 0],
    "every device starts from the server's weights",
  );
  // both compute on version 0; rank 0 arrives first
  assert.deepEqual(await d.step(0, [1]), { staleness: 0, dropped: 0 });
  assert.deepEqual(await d.step(1, [2]), { staleness: 1, dropped: 0 });
  assert.deepEqual([...d.ps.weights], [-3]);
  // fetchEvery 1: each refreshes before its next step (rank 0 gets version 2, then rank 1 version 3)
  assert.deepEqual(await d.step(0, [1]), { staleness: 0, dropped: 0 });
  assert.equal(d.replicas[0]!.params[0], -3);
  assert.deepEqual(await d.step(1, [2]), { staleness: 0, dropped: 0 });
  assert.equal(d.replicas[1]!.params[0], -4);
  assert.deepEqual(
    d.ps.pushes.map((p) => p.computedAt),
    [0, 0, 2, 3],
  );
  await d.finish();
  assert.deepEqual(
    d.replicas.map((r) => r.params[0]),
    [-6, -6],
    "after onFinish every replica holds the server's weights",
  );
});

test('async: pushEvery n pushes the mean of n gradients (with the last lr); fetchEvery n refreshes every n steps', async () => {
  const d = devices(1, [10, 20], { fetchEvery: 2, pushEvery: 2 });
  await d.start();
  const rep: TestReplica = d.replicas[0]!;
  assert.deepEqual(await d.step(0, [1, 2], 0.1), {});
  assert.equal(d.ps.pushes.length, 0, 'nothing pushed after one of two steps');
  // mark the local copy: step 2 must not fetch (2 steps between fetches), step 3 must
  rep.params.set([-1, -1]);
  assert.deepEqual(await d.step(0, [3, 6], 0.5), { staleness: 0, dropped: 0 });
  assert.deepEqual([...rep.params], [-1, -1], 'no fetch before step 2');
  // mean gradient [2, 4] with lr 0.5: [10 − 1, 20 − 2]
  assert.deepEqual(
    d.ps.pushes.map((p) => [p.grads, p.lr]),
    [[[2, 4], 0.5]],
  );
  assert.deepEqual([...d.ps.weights], [9, 18]);
  assert.deepEqual(await d.step(0, [4, 4], 1), {});
  assert.deepEqual([...rep.params], [9, 18], 'fetched before step 3');
  // onFinish pushes what is pending (one gradient, not halved)
  await d.finish();
  assert.deepEqual(d.ps.pushes[1]!.grads, [4, 4]);
  assert.deepEqual([...d.ps.weights], [5, 14]);
});

test('async: a gradient staler than maxStaleness is dropped and the device refreshes at once', async () => {
  const d = devices(2, [0], { fetchEvery: 100, pushEvery: 1, maxStaleness: 0 });
  await d.start();
  assert.deepEqual(await d.step(0, [1]), { staleness: 0, dropped: 0 });
  // rank 1 computed on version 0, the server is at 1
  assert.deepEqual(await d.step(1, [5]), { staleness: 1, dropped: 1 });
  assert.deepEqual([...d.ps.weights], [-1], 'the stale gradient was not applied');
  assert.equal(d.replicas[1]!.params[0], -1, "rank 1 took the server's weights at once");
  // its next gradient is computed on version 1: fresh
  assert.deepEqual(await d.step(1, [5]), { staleness: 0, dropped: 0 });
  assert.deepEqual([...d.ps.weights], [-6]);
  await d.finish();
});

test('async: a step with no samples pushes nothing', async () => {
  const d = devices(1, [0], { fetchEvery: 1, pushEvery: 1 });
  await d.start();
  assert.deepEqual(await d.step(0, [7], 1, 0), {});
  await d.finish();
  assert.equal(d.ps.pushes.length, 0);
  assert.deepEqual([...d.ps.weights], [0]);
});
