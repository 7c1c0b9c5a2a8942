import { test } from 'node:test';
import assert from 'node:assert/strict';
import { easgdSyncStrategy, easgdAsyncStrategy, easgdEntry } from '../../src/parallel/strategies/easgd.ts';
import { localGroup } from './localGroup.ts';
import { driftReplica, localParameterServer, stepInfo } from './strategyHarness.ts';
import { assertClose } from '../util/close.ts';

test('easgd sync: every period x_i ← x_i − α(x_i − x̃) and x̃ ← x̃ + α·G·(x̄ − x̃), with x̄ the mean before the pull', async () => {
  const comms = localGroup(2);
  // rank 0 moves +1 per step, rank 1 +3; α = 0.25, period 2
  const replicas = [driftReplica(1, [0], [2]), driftReplica(3, [7], [6])];
  const seen: number[][] = [[], []];
  const centres: number[] = [];
  await Promise.all(
    comms.map(async (comm, r) => {
      const s = easgdSyncStrategy(comm, 0.25, 2),
        rep = replicas[r]!;
      await s.onStart!(rep);
      for (let step = 0; step < 4; step++) {
        rep.localStep(0);
        if (r === 1) rep.state[0] = rep.state[0]! + 4;
        await s.afterStep!(rep, stepInfo(step));
        seen[r]!.push(rep.params[0]!);
      }
      if (r === 0) centres.push((await s.modelParams!(rep))[0]!);
    }),
  );
  // start at rank 0's 0, x̃ = 0
  // step 1: 1 and 3, no exchange
  // step 2: 2 and 6, x̄ = 4: x0 = 2 − 0.25·2 = 1.5, x1 = 6 − 0.25·6 = 4.5, x̃ = 0 + 0.5·4 = 2
  // step 3: 2.5 and 7.5
  // step 4: 3.5 and 10.5, x̄ = 7: x0 = 3.5 − 0.25·1.5 = 3.125, x1 = 10.5 − 0.25·8.5 = 8.375, x̃ = 2 + 0.5·5 = 4.5
  assert.deepEqual(seen, [
    [1, 1.5, 2.5, 3.125],
    [3, 4.5, 7.5, 8.375],
  ]);
  assert.deepEqual(centres, [4.5], 'the model is the centre');
  // state (BatchNorm statistics) is averaged at each exchange: from rank 0's 2, rank 1 adds 4 per step:
  // step 2: (2 + 10)/2 = 6; step 4: (6 + 14)/2 = 10
  for (const r of replicas) assertClose(r.state, [10], { what: 'state after the second exchange' });
});

test('easgd async: the centre lives on the server; each exchange d = α(x − x̃); x̃ += d; x −= d, in arrival order', async () => {
  const ps = localParameterServer([2]);
  const replicas = [driftReplica(1, [0]), driftReplica(3, [9])];
  const strategies = replicas.map(() => easgdAsyncStrategy(ps, 0.5, 1));
  // every replica starts at the server's centre
  for (const [r, s] of strategies.entries()) await s.onStart!(replicas[r]!);
  assert.deepEqual(
    replicas.map((r) => r.params[0]),
    [2, 2],
  );
  // devices take their turns one after the other (no collective between them)
  const order = [0, 1, 0];
  for (const [step, r] of order.entries()) {
    replicas[r]!.localStep(0);
    await strategies[r]!.afterStep!(replicas[r]!, stepInfo(step));
  }
  // rank 0: 3, d = 0.5·(3 − 2) = 0.5 → x̃ 2.5, x0 2.5
  // rank 1: 5, d = 0.5·(5 − 2.5) = 1.25 → x̃ 3.75, x1 3.75
  // rank 0: 3.5, d = 0.5·(3.5 − 3.75) = −0.125 → x̃ 3.625, x0 3.625
  assert.deepEqual([...ps.weights], [3.625]);
  assert.deepEqual(
    replicas.map((r) => r.params[0]),
    [3.625, 3.75],
  );
  assert.equal(ps.exchanges, 3);
  await Promise.all(strategies.map((s, r) => s.onFinish!(replicas[r]!)));
  assert.deepEqual([...(await strategies[1]!.modelParams!(replicas[1]!))], [3.625], "the model is the server's centre");
});

test('easgd async: with period 2 a replica exchanges every second step only', async () => {
  const ps = localParameterServer([0]);
  const rep = driftReplica(2, [0]);
  const s = easgdAsyncStrategy(ps, 0.5, 2);
  await s.onStart!(rep);
  const exchanges: number[] = [];
  for (let step = 0; step < 4; step++) {
    rep.localStep(0);
    await s.afterStep!(rep, stepInfo(step));
    exchanges.push(ps.exchanges);
  }
  assert.deepEqual(exchanges, [0, 1, 1, 2]);
  // step 2: x 4, d = 2 → x̃ 2, x 2; step 4: x 6, d = 0.5·(6 − 2) = 2 → x̃ 4, x 4
  assert.deepEqual([rep.params[0], ps.weights[0]], [4, 4]);
});

test('easgd entry: the mode decides the parameter server and lockstep; synchronous needs α·G < 1', () => {
  const spec = (mode: 'sync' | 'async', alpha = 0.1) => ({ type: 'easgd' as const, alpha, period: 1, mode });
  assert.equal(easgdEntry.needsParameterServer(spec('async')), true);
  assert.equal(easgdEntry.needsParameterServer(spec('sync')), false);
  assert.throws(() => easgdEntry.check!(spec('sync', 0.25), 4), {
    message:
      "train.strategy.easgd.alpha: synchronous EASGD needs alpha·devices < 1 (the centre's moving rate), got 0.25·4 = 1; use alpha < 0.25",
  });
  easgdEntry.check!(spec('sync', 0.24), 4);
  easgdEntry.check!(spec('async', 0.9), 4);
});
