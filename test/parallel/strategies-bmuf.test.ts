import { test } from 'node:test';
import assert from 'node:assert/strict';
import { bmufStrategy, bmufEntry, defaultBlockMomentum, type BmufOptions } from '../../src/parallel/strategies/bmuf.ts';
import type { Strategy } from '../../src/parallel/strategy.ts';
import type { Communicator } from '../../src/comm/communicator.ts';
import { localGroup } from './localGroup.ts';
import { driftReplica, stepInfo } from './strategyHarness.ts';

/**
 * Two devices, rank 0 moving +1 per step and rank 1 +3, from rank 0's 0 (rank 1 starts elsewhere:
 * the broadcast must win). Runs `steps` local steps; returns each rank's weight after every step,
 * the block model θ before onFinish, and the weights after it.
 */
async function run(make: (comm: Communicator) => Strategy, steps: number) {
  const comms = localGroup(2);
  const replicas = [driftReplica(1, [0], [1]), driftReplica(3, [50], [5])];
  const seen: number[][] = [[], []];
  let theta = NaN;
  await Promise.all(
    comms.map(async (comm, r) => {
      const s = make(comm),
        rep = replicas[r]!;
      await s.onStart!(rep);
      for (let step = 0; step < steps; step++) {
        rep.localStep(0);
        rep.state[0] = rep.state[0]! + 2 * r;
        await s.afterStep!(rep, stepInfo(step));
        seen[r]!.push(rep.params[0]!);
      }
      if (r === 0) theta = (await s.modelParams!(rep))[0]!;
      await s.onFinish!(rep);
    }),
  );
  return { seen, theta, final: replicas.map((rep) => rep.params[0]!), state: replicas.map((rep) => rep.state[0]!) };
}

const bmuf = (o: BmufOptions) => (comm: Communicator) => bmufStrategy(comm, o);

test('bmuf classic: Δ ← η·Δ + ζ·(w̄ − s); θ ← s + Δ; replicas restart from s = θ', async () => {
  const { seen, theta, final, state } = await run(
    bmuf({ period: 2, blockMomentum: 0.5, blockLr: 1, nesterov: false }),
    4,
  );
  // block 1: 2 and 6 → w̄ 4; Δ = 0.5·0 + 1·(4 − 0) = 4; θ = 4; s = 4
  // block 2: 6 and 10 → w̄ 8; Δ = 0.5·4 + 1·(8 − 4) = 6; θ = 4 + 6 = 10; s = 10
  assert.deepEqual(seen, [
    [1, 4, 5, 10],
    [3, 4, 7, 10],
  ]);
  assert.equal(theta, 10);
  assert.deepEqual(final, [10, 10], 'the replicas end on the block model');
  // state is the plain mean at every block: from 1, rank 1 adds 2 per step: (1 + 5)/2 = 3, then (3 + 7)/2 = 5
  assert.deepEqual(state, [5, 5]);
});

test('bmuf Nesterov: the replicas restart from the look-ahead s = θ + η·Δ, the block gradient measured from s', async () => {
  const { seen, theta, final } = await run(bmuf({ period: 2, blockMomentum: 0.5, blockLr: 1, nesterov: true }), 4);
  // block 1: w̄ 4; Δ = 4; θ = 4; s = 4 + 0.5·4 = 6
  // block 2: 8 and 12 → w̄ 10; Δ = 0.5·4 + (10 − 6) = 6; θ = 6 + 6 = 12; s = 12 + 3 = 15
  assert.deepEqual(seen, [
    [1, 6, 7, 15],
    [3, 6, 9, 15],
  ]);
  assert.equal(theta, 12, 'the model is θ, not the look-ahead');
  assert.deepEqual(final, [12, 12]);
});

test('bmuf block learning rate ζ scales the block gradient; a partial last block is filtered at the end', async () => {
  const { seen, theta, final } = await run(bmuf({ period: 2, blockMomentum: 0.25, blockLr: 2, nesterov: false }), 3);
  // block 1: w̄ 4; Δ = 2·4 = 8; θ = s = 8
  // step 3 (a partial block): 9 and 11; onFinish: w̄ 10; Δ = 0.25·8 + 2·(10 − 8) = 6; θ = 14
  assert.deepEqual(seen, [
    [1, 8, 9],
    [3, 8, 11],
  ]);
  assert.equal(theta, 8, 'θ before the last block');
  assert.deepEqual(final, [14, 14]);
});

test('bmuf with η = 0, ζ = 1 is plain model averaging', async () => {
  const { seen } = await run(bmuf({ period: 1, blockMomentum: 0, blockLr: 1, nesterov: false }), 2);
  // 1 and 3 → 2; 3 and 5 → 4
  assert.deepEqual(seen, [
    [2, 4],
    [2, 4],
  ]);
});

test('bmuf entry: block momentum left out is 1 − 1/G (Chen & Huo)', async () => {
  assert.equal(defaultBlockMomentum(4), 0.75);
  // on 2 devices: η = 0.5, so the classic run above
  const { seen, theta } = await run(
    (comm) => bmufEntry.create({ type: 'bmuf', period: 2, blockLr: 1, nesterov: false }, { comm, ps: null }),
    4,
  );
  assert.deepEqual(seen, [
    [1, 4, 5, 10],
    [3, 4, 7, 10],
  ]);
  assert.equal(theta, 10);
});
