import { test } from 'node:test';
import assert from 'node:assert/strict';
import { bspStrategy } from '../../src/parallel/strategies/bsp.ts';
import type { ReplicaView } from '../../src/parallel/strategy.ts';
import { localGroup } from './localGroup.ts';
import { assertClose } from '../util/close.ts';

/** A replica whose "training step" adds `rate` to every weight, so averages are easy to predict. */
function fakeReplica(rate: number): ReplicaView & { steps: number } {
  const params = new Float32Array(3),
    state = new Float32Array(1);
  const r = {
    params,
    grads: new Float32Array(3),
    state,
    steps: 0,
    localStep: () => {
      for (let i = 0; i < 3; i++) params[i] = params[i]! + rate;
      r.steps++;
    },
  };
  return r;
}

test('bsp: devices that run out of data at different times leave the averaging cleanly (weighted by samples)', async () => {
  // rank 0 trains 5 steps of 4 samples, rank 1 only 2 steps of 2 samples, rank 2 nothing; period 2
  const comms = localGroup(3);
  const plan = [
    { steps: 5, samples: 4, rate: 1 },
    { steps: 2, samples: 2, rate: 10 },
    { steps: 0, samples: 0, rate: 100 },
  ];
  const replicas = plan.map((p) => fakeReplica(p.rate));
  await Promise.all(
    plan.map(async (p, rank) => {
      const s = bspStrategy(comms[rank]!, 2),
        replica = replicas[rank]!;
      await s.onStart!(replica);
      for (let step = 0; step < p.steps; step++) {
        replica.localStep(0);
        await s.afterStep!(replica, { step, epoch: 0, lr: 0, samples: p.samples });
      }
      await s.onFinish!(replica);
    }),
  );
  // round 1 (after 2 steps): rank 0 at 2 (weight 8), rank 1 at 20 (weight 4; its last work), rank 2 at 0 (weight 0)
  //   → (8·2 + 4·20) / 12 = 8
  // round 2: rank 0 at 8 + 2 = 10 (weight 8) alone → 10; rank 0's 5th step → 11 (weight 4) → 11
  for (const r of replicas) assertClose(r.params, [11, 11, 11], { what: 'final weights' });
  assert.deepEqual(
    replicas.map((r) => r.steps),
    [5, 2, 0],
  );
});
