/**
 * The data-parallel strategies that average weights rather than gradients (bsp, bmuf, synchronous
 * easgd) train a speech model on variable-length batches: each runs a few steps on its devices (in
 * this thread), agrees on its non-finite flags, evaluates with CER/WER and changes the weights. And
 * a non-finite step on speech is skipped, and located by the probe that reruns the padded batch.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { jsBackend } from '../../src/kernels/js/index.ts';
import { runDevice } from '../../src/runtime/job/deviceRun.ts';
import { createStrategy } from '../../src/parallel/strategies/index.ts';
import { Replica } from '../../src/runtime/device/replica.ts';
import { evaluateReplica } from '../../src/runtime/eval/evaluateReplica.ts';
import type { TrainEvent } from '../../src/runtime/events/events.ts';
import { localGroup } from '../parallel/localGroup.ts';
import { trainInMemory } from '../parallel/inMemory.ts';
import { FaultPlan } from '../../src/runtime/faults/faultPlan.ts';
import { speechConfig, syntheticSpeech } from './trainHelpers.ts';

const data = syntheticSpeech(24),
  heldOut = syntheticSpeech(6, { seed: 3 });

for (const strategy of [
  { bsp: { period: 2 } },
  { bmuf: { period: 2 } },
  { easgd: { period: 2, alpha: 0.2, mode: 'sync' } },
]) {
  const name = Object.keys(strategy)[0]!;
  test(`${name} trains a speech model on 2 devices`, async () => {
    const config = speechConfig({ train: { devices: 2, strategy, epochs: 2 } });
    const events: TrainEvent[] = [];
    await Promise.all(
      localGroup(2).map((comm) =>
        runDevice({
          config,
          rank: comm.rank,
          worldSize: 2,
          backend: jsBackend,
          strategy: createStrategy(config.train.strategy, { comm, ps: null }),
          train: data,
          test: comm.rank === 0 ? heldOut : null,
          checkpointPath: null,
          emit: (e) => events.push(e),
          shared: false,
          comm,
        }),
      ),
    );
    const steps = events.filter((e) => e.type === 'step');
    assert.equal(steps.length, 2 * 2 * 3, '3 steps an epoch on each device');
    assert.ok(
      steps.every((s) => Number.isFinite(s.loss) && !s.skipped),
      'finite losses, nothing skipped',
    );
    const evals = events.filter((e): e is Extract<TrainEvent, { type: 'eval' }> => e.type === 'eval');
    assert.equal(evals.length, 1);
    assert.ok(evals[0]!.testCER! >= 0 && Number.isFinite(evals[0]!.testWER!));
    const untrained = await evaluateReplica(new Replica(jsBackend, config), heldOut);
    assert.notEqual(evals[0]!.testLoss, untrained.loss, 'training changed the model');
  });
}

test('a non-finite speech step is skipped, and located on the padded batch when it repeats', async () => {
  const once = await trainInMemory(speechConfig(), data, null, { faults: new FaultPlan({ nan: [[0, 1]] }) });
  assert.deepEqual(
    once.events.filter((e) => e.type === 'step' && e.skipped).map((e) => (e as { step: number }).step),
    [1],
  );
  await assert.rejects(
    trainInMemory(speechConfig({ train: { maxBadSteps: 1 } }), data, null, {
      faults: new FaultPlan({ nan: [[0, 1]] }),
    }),
    /training diverged: the gradients are non-finite at step 2 \(epoch 1\); .*non-finite values first appeared on device 0 in the gradient of layers\.0\.kernel/,
  );
});
