import { test } from 'node:test';
import assert from 'node:assert/strict';
import { syncStrategy } from '../../src/parallel/strategies/sync.ts';
import { asyncStrategy } from '../../src/parallel/strategies/async.ts';
import { clipToNorm, sumOfSquares } from '../../src/optim/clipGradNorm.ts';
import { localGroup } from './localGroup.ts';
import { sgdReplica, localParameterServer, stepInfo, type TestReplica } from './strategyHarness.ts';

/** A replica whose clipGradients clips to norm 1 as the Replica does, recording the norms it saw. */
function clippingReplica(): TestReplica & { norms: number[] } {
  const r = Object.assign(sgdReplica([0, 0]), { norms: [] as number[] });
  r.clipGradients = async (g = r.grads) => {
    const norm = Math.sqrt(sumOfSquares(g));
    r.norms.push(norm);
    clipToNorm([g], norm, 1);
  };
  return r;
}

test('sync clips the gradient it pushes; a non-finite one is neither clipped nor pushed', async () => {
  const [comm] = localGroup(1);
  const ps = localParameterServer([0, 0], undefined, 1);
  const s = syncStrategy(ps, comm!),
    rep = clippingReplica();
  for (const [step, g] of [
    [0, [3, 4]],
    [1, [NaN, 1]],
    [2, [0.3, 0.4]],
  ] as const) {
    await s.beforeStep!(rep, stepInfo(step, 1));
    rep.grads.set(g);
    await s.applyUpdate!(rep, stepInfo(step, 1));
  }
  assert.deepEqual(
    rep.norms.map((n) => +n.toFixed(6)),
    [5, 0.5],
  );
  assert.deepEqual(
    ps.pushes.map((p) => p.grads.map((v) => +v.toFixed(6))),
    [
      [0.6, 0.8],
      [0.3, 0.4],
    ],
  );
});

test('async clips the gradient it pushes: the mean over pushEvery steps', async () => {
  const ps = localParameterServer([0, 0], undefined, 1);
  const s = asyncStrategy(ps, { fetchEvery: 1, pushEvery: 2 }),
    rep = clippingReplica();
  await s.onStart!(rep);
  for (const [step, g] of [
    [0, [2, 4]],
    [1, [4, 4]],
  ] as const) {
    await s.beforeStep!(rep, stepInfo(step, 1));
    rep.grads.set(g);
    await s.applyUpdate!(rep, stepInfo(step, 1));
  }
  // the mean (3, 4) has norm 5, pushed as (0.6, 0.8); nothing was clipped on the step that only accumulated
  assert.deepEqual(
    rep.norms.map((n) => +n.toFixed(6)),
    [5],
  );
  assert.deepEqual(
    ps.pushes.map((p) => p.grads.map((v) => +v.toFixed(6))),
    [[0.6, 0.8]],
  );
});
