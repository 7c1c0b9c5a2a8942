/**
 * One stop for every device count: an abort requested in onEpoch after epoch e stops the run before
 * the first step of epoch e + 1 on one device and on two device threads alike (the same last step,
 * the same onEpoch calls, the same epoch numbers everywhere, 0-based), and a stopped run's final
 * test figures are those of the weights it stopped with (its model file evaluated again).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { evaluateCheckpoint } from '../../src/runtime/infer/evaluateCheckpoint.ts';
import { trainOnData, type TrainResult } from '../../src/runtime/run/train.ts';
import type { RunConfig } from '../../src/config/runConfig.ts';
import { tmpDir } from '../cli/helpers.ts';
import { evalConfig, eventsOf, ofType, splitData } from './evalHelpers.ts';
import { randomPort, SECRET } from './jobHelpers.ts';
import { HoldSchedule, holdsAtEpochEnds } from '../../src/runtime/job/stop/holds.ts';
import { train } from '../../src/runtime/run/train.ts';
import { tinyConfig } from '../parallel/helpers.ts';

/** evalConfig's MLP for 4 epochs of 12 steps whatever the device count (the global batch is fixed). */
function fourEpochs(dir: string, devices: number): RunConfig {
  const config = evalConfig(dir, { train: 'epochs: 4' });
  return {
    ...config,
    data: { ...config.data, batchSizeScope: 'global' },
    train: { ...config.train, devices },
  };
}

interface Observed {
  result: TrainResult;
  onEpoch: number[];
  /** [epoch, step, which set] of each evaluation event */
  evals: [number, number, string][];
  /** the last step each device ran */
  lastSteps: number[];
  /** the 'stopped' event, but for its time */
  stoppedEvent: Record<string, unknown>;
}

/** Trains on `devices` devices and aborts from onEpoch after epoch `abortAfter`. */
async function abortInOnEpoch(devices: number, abortAfter: number): Promise<Observed> {
  const dir = tmpDir('paratrain-stop-agreement-');
  const config = fourEpochs(dir, devices);
  const controller = new AbortController();
  const onEpoch: number[] = [];
  const result = await trainOnData(config, await splitData(config), {
    out: join(dir, 'run'),
    signal: controller.signal,
    onEpoch: (e) => {
      onEpoch.push(e.epoch);
      if (e.epoch === abortAfter) controller.abort();
    },
  });
  const events = eventsOf(result.runDir);
  const evals = ofType(events, 'eval').map(
    (e) => [e.epoch, e.step, 'valLoss' in e ? 'val' : 'test'] as [number, number, string],
  );
  const steps = ofType(events, 'step');
  const lastSteps = Array.from({ length: devices }, (_, rank) =>
    Math.max(...steps.filter((e) => e.rank === rank).map((e) => e.step as number)),
  );
  const { time: _, ...stoppedEvent } = ofType(events, 'stopped')[0] ?? {};
  return { result, onEpoch, evals, lastSteps, stoppedEvent };
}

test('an abort in onEpoch after epoch 1 stops before epoch 2 on 1 device and on 2 device threads alike', {
  timeout: 240_000,
}, async () => {
  const one = await abortInOnEpoch(1, 1);
  const two = await abortInOnEpoch(2, 1);
  for (const [name, run] of [
    ['1 device', one],
    ['2 devices', two],
  ] as const) {
    assert.deepEqual(run.result.stopped, { step: 24, epoch: 1, signal: 'abort' }, `${name}: result.stopped`);
    assert.equal(run.result.steps, 24, name);
    assert.deepEqual(run.onEpoch, [0, 1], `${name}: onEpoch for epochs 0 and 1 only, no partial epoch`);
    assert.ok(
      run.lastSteps.every((s) => s === 23),
      `${name}: every device's last step is 23 (${run.lastSteps})`,
    );
    assert.deepEqual(run.stoppedEvent, { type: 'stopped', step: 24, epoch: 1, signal: 'abort' }, name);
    // the validation split after epochs 0 and 1, then the test set on the stopped weights
    assert.deepEqual(
      run.evals,
      [
        [0, 12, 'val'],
        [1, 24, 'val'],
        [1, 24, 'test'],
      ],
      `${name}: evaluations`,
    );
  }
  assert.deepEqual(two.onEpoch, one.onEpoch);
  assert.deepEqual(two.evals, one.evals);
});

test("2 processes: an abort in process 1's onEpoch after epoch 1 stops both before epoch 2, as on one device", {
  timeout: 240_000,
}, async () => {
  const dir = tmpDir('paratrain-stop-agreement-');
  const config = fourEpochs(dir, 1);
  const data = await splitData(config);
  process.env.PARATRAIN_SECRET ??= SECRET;
  const masterPort = randomPort();
  const seen: number[][] = [[], []];
  const results = await Promise.all(
    [0, 1].map((rank) => {
      const controller = new AbortController();
      return trainOnData(config, data, {
        out: join(dir, 'run'),
        signal: controller.signal,
        processes: { rank, worldSize: 2, masterAddr: '127.0.0.1', masterPort },
        onEpoch: (e) => {
          seen[rank]!.push(e.epoch);
          if (rank === 1 && e.epoch === 1) controller.abort();
        },
      });
    }),
  );
  for (const rank of [0, 1]) {
    assert.deepEqual(results[rank]!.stopped, { step: 24, epoch: 1, signal: 'abort' }, `process ${rank}`);
    assert.deepEqual(seen[rank], [0, 1], `process ${rank}: onEpoch for epochs 0 and 1 only`);
  }
  const steps = ofType(eventsOf(results[0]!.runDir), 'step');
  assert.equal(Math.max(...steps.map((e) => e.step as number)), 23, 'the last step is 23');
});

test("a stopped run's test figures are its stopped weights': the model file evaluated again gives them", {
  timeout: 240_000,
}, async () => {
  for (const devices of [1, 2]) {
    const dir = tmpDir('paratrain-stop-figures-');
    const config = fourEpochs(dir, devices);
    const controller = new AbortController();
    // after epoch 0's evaluation, of other weights than those the run stops with (devices on threads run a
    // few steps past 17 before its event reaches onStep: an abort there lands after the steps in flight)
    const result = await trainOnData(config, await splitData(config, false), {
      out: join(dir, 'run'),
      signal: controller.signal,
      onStep: (s) => {
        if (s.step === 17) controller.abort('SIGINT');
      },
    });
    assert.ok(result.stopped, `${devices} devices: stopped`);
    const { step, epoch } = result.stopped;
    assert.ok(step > 17 && step < 48, `stopped before the end (${step})`);
    assert.equal(epoch, Math.floor((step - 1) / 12), `the epoch of step ${step - 1}`);
    if (devices === 1) assert.equal(step, 18, 'one device stops after the step whose onStep aborted');
    const evaluated = await evaluateCheckpoint(result.checkpoint);
    assert.equal(result.testAccuracy, evaluated.testAccuracy, `${devices} devices: test accuracy`);
    assert.ok(
      Math.abs(result.testLoss - evaluated.testLoss) <= 1e-6 * Math.abs(evaluated.testLoss),
      `${devices} devices: test loss ${result.testLoss} vs ${evaluated.testLoss} of the model file`,
    );
    const end = ofType(eventsOf(result.runDir), 'end')[0]!;
    assert.equal(end.testAccuracy, evaluated.testAccuracy, 'the end event records the same');
  }
});

test('holds: at every epoch end but the last with onEpoch and signal on several devices; early stopping adds its verdicts', () => {
  const dir = tmpDir('paratrain-holds-');
  const signal = new AbortController().signal,
    onEpoch = () => {};
  assert.equal(holdsAtEpochEnds(2, { signal, onEpoch }), true);
  assert.equal(holdsAtEpochEnds(1, { signal, onEpoch }), false, 'one device runs between its callbacks');
  assert.equal(holdsAtEpochEnds(2, { signal }), false, 'nothing aborts from onEpoch');
  assert.equal(holdsAtEpochEnds(2, { onEpoch }), false, 'nothing to abort');
  // 4 epochs of 10 steps
  const plain = evalConfig(dir, { train: 'epochs: 4' });
  const ends = new HoldSchedule(plain, 10, true, null);
  assert.equal(ends.first(), 9);
  assert.deepEqual([ends.after(9), ends.after(19), ends.after(29)], [19, 29, null], 'none at the last step');
  assert.equal(ends.needsVerdict(9), false);
  assert.equal(new HoldSchedule(plain, 10, false, null).first(), null);
  // resumed mid-epoch 1: the end of that epoch
  assert.equal(new HoldSchedule(plain, 10, true, { step: 15 } as never).first(), 19);
  // early stopping evaluating every 2 epochs of 6: verdicts after epochs 1 and 3 (not 5, the last)
  const early = evalConfig(dir, { train: 'epochs: 6, evalEvery: 2, earlyStopping: true' });
  const both = new HoldSchedule(early, 10, true, null);
  assert.deepEqual([both.first(), both.after(9), both.after(19)], [9, 19, 29]);
  assert.deepEqual(
    [9, 19, 29, 39, 49].map((h) => both.needsVerdict(h)),
    [false, true, false, true, false],
  );
  const verdictsOnly = new HoldSchedule(early, 10, false, null);
  assert.deepEqual([verdictsOnly.first(), verdictsOnly.after(19), verdictsOnly.after(39)], [19, 39, null]);
});

test('early stopping with holds at epoch ends (onEpoch and signal, 2 devices) stops where it stops without them', {
  timeout: 240_000,
}, async () => {
  const dir = tmpDir('paratrain-stop-agreement-');
  const config = evalConfig(dir, {
    optimizer: '{ sgd: { lr: 1.0e-9 } }',
    train: 'epochs: 6, earlyStopping: { patience: 2, minDelta: 0.001 }, devices: 2, strategy: hybrid',
  });
  const epochs: number[] = [];
  const result = await trainOnData(config, await splitData(config), {
    out: join(dir, 'run'),
    signal: new AbortController().signal,
    onEpoch: (e) => epochs.push(e.epoch),
  });
  // 6 steps an epoch on 2 devices; the verdict after epoch 2 stops it (early-stopping.test.ts without the holds)
  assert.deepEqual([result.earlyStopped?.step, result.earlyStopped?.epoch, result.earlyStopped?.bestEpoch], [18, 2, 0]);
  assert.deepEqual(epochs, [0, 1, 2]);
});

test('holds at epoch ends do not wait for a device the run goes on without (async, a device lost mid-epoch)', {
  timeout: 120_000,
}, async () => {
  const dir = tmpDir('paratrain-stop-agreement-');
  const epochs: number[] = [];
  // 96 samples, global batch 24: 4 steps an epoch, 3 epochs; device 1 throws at step 2
  const result = await train(tinyConfig({ train: { devices: 3, strategy: 'async', epochs: 3 } }), {
    out: join(dir, 'run'),
    failAt: { rank: 1, step: 2 },
    signal: new AbortController().signal,
    onEpoch: (e) => epochs.push(e.epoch),
    log: () => {},
  });
  assert.equal(result.stopped, undefined, 'the run ran to its end');
  assert.equal(result.steps, 12);
  assert.deepEqual(epochs, [0, 1, 2]);
});
