import { test } from 'node:test';
import assert from 'node:assert/strict';
import { bspStrategy } from '../../src/parallel/strategies/bsp.ts';
import { localGroup } from './localGroup.ts';
import { driftReplica, stepInfo } from './strategyHarness.ts';
import { assertClose } from '../util/close.ts';

test('bsp: every period the weights and state are averaged, weighted by the samples each device processed', async () => {
  const comms = localGroup(3);
  // rank r adds RATE[r] to its weights per step and processes SAMPLES[r] samples per step
  const RATE = [1, 2, 4],
    SAMPLES = [1, 1, 2];
  const replicas = [
    driftReplica(RATE[0]!, [0, 10], [3]),
    driftReplica(RATE[1]!, [5, 5], [6]),
    driftReplica(RATE[2]!, [9, 9], [9]),
  ];
  const seen: number[][][] = [[], [], []];
  await Promise.all(
    comms.map(async (comm, r) => {
      const s = bspStrategy(comm, 2),
        rep = replicas[r]!;
      await s.onStart!(rep);
      for (let step = 0; step < 4; step++) {
        rep.localStep(0);
        // BatchNorm statistics drift apart too: rank r's state grows by r per step
        rep.state[0] = rep.state[0]! + r;
        await s.afterStep!(rep, stepInfo(step, 0, SAMPLES[r]));
        seen[r]!.push([...rep.params, rep.state[0]!]);
      }
      await s.onFinish!(rep);
    }),
  );
  // start: rank 0's [0, 10], state 3. Weights over a period: 2, 2, 4 samples (total 8).
  // step 1: no averaging, each replica on its own
  assert.deepEqual(
    seen.map((s) => s[0]),
    [
      [1, 11, 3],
      [2, 12, 4],
      [4, 14, 5],
    ],
  );
  // step 2: before averaging [2, 12, 3], [4, 14, 5], [8, 18, 7] → (2·2 + 2·4 + 4·8)/8 = 5.5, …, state (2·3 + 2·5 + 4·7)/8 = 5.5
  for (const s of seen) assertClose(s[1]!, [5.5, 15.5, 5.5], { what: 'after the first period' });
  // step 3: each on its own again
  assert.deepEqual(
    seen.map((s) => s[2]),
    [
      [6.5, 16.5, 5.5],
      [7.5, 17.5, 6.5],
      [9.5, 19.5, 7.5],
    ],
  );
  // step 4: [7.5, 17.5, 5.5], [9.5, 19.5, 7.5], [13.5, 23.5, 9.5] → (2·7.5 + 2·9.5 + 4·13.5)/8 = 11, state 8
  for (const s of seen) assertClose(s[3]!, [11, 21, 8], { what: 'after the second period' });
  // onFinish at a period boundary: nothing left to average
  for (const r of replicas) assertClose(r.params, [11, 21], { what: 'final weights' });
});

test('bsp: a partial last period is averaged at the end', async () => {
  const comms = localGroup(2);
  const replicas = [driftReplica(1, [0]), driftReplica(3, [0])];
  await Promise.all(
    comms.map(async (comm, r) => {
      const s = bspStrategy(comm, 4),
        rep = replicas[r]!;
      await s.onStart!(rep);
      for (let step = 0; step < 3; step++) {
        rep.localStep(0);
        await s.afterStep!(rep, stepInfo(step, 0, r === 0 ? 3 : 1));
      }
      // three steps of a period of four: not averaged yet
      assert.equal(rep.params[0], r === 0 ? 3 : 9);
      await s.onFinish!(rep);
    }),
  );
  // (9·3 + 3·9) / 12 = 4.5
  for (const r of replicas) assertClose(r.params, [4.5], { what: 'final weights' });
});
