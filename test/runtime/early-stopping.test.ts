/**
 * train.earlyStopping: after `patience` evaluations without an improvement of more than minDelta the
 * run stops as a graceful stop does — every device after the same step, the final checkpoint (and
 * a checkpoint set) written, the test set evaluated — and the result says earlyStopped. A learning
 * rate of 1e-9 makes the validation loss stop improving at once (changes far below minDelta).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { readCheckpoint } from '../../src/runtime/checkpoint/checkpoint.ts';
import { latestCompleteSet } from '../../src/runtime/checkpoint/checkpointSet.ts';
import { firstHold, holdAfter, reevaluatesAtStart } from '../../src/runtime/eval/evalSchedule.ts';
import { allocateStopGate } from '../../src/runtime/job/stop/protocol.ts';
import { StopGateDevice } from '../../src/runtime/job/stop/deviceSide.ts';
import { StopGateControl } from '../../src/runtime/job/stop/controlSide.ts';
import { trainOnData, type TrainResult } from '../../src/runtime/run/train.ts';
import type { SetState } from '../../src/runtime/checkpoint/checkpointSet.ts';
import type { RunConfig } from '../../src/config/runConfig.ts';
import { tmpDir } from '../cli/helpers.ts';
import { evalConfig, eventsOf, ofType, splitData } from './evalHelpers.ts';
import { assertSameTensors, tensorsOf } from './resumeHelpers.ts';

const STALLED = {
  optimizer: '{ sgd: { lr: 1.0e-9 } }',
  train: 'epochs: 6, earlyStopping: { patience: 2, minDelta: 0.001 }',
};

/** The checks every early-stopped run of STALLED passes: stopped after epoch 2 of 0 … 5 (step `stop`), on every device. */
function checkStoppedEarly(result: TrainResult, devices: number, stop: number): void {
  const events = eventsOf(result.runDir);
  assert.deepEqual(result.earlyStopped, {
    step: stop,
    epoch: 2,
    metric: 'valLoss',
    patience: 2,
    best: result.earlyStopped!.best,
    bestEpoch: 0,
  });
  assert.equal(result.stopped, undefined, 'not a stop by a signal');
  assert.equal(result.steps, stop);
  const verdicts = ofType(events, 'earlyStopping');
  assert.deepEqual(
    verdicts.map((e) => [e.epoch, e.wait, e.stop]),
    [
      [0, 0, false],
      [1, 1, false],
      [2, 2, true],
    ],
  );
  const steps = ofType(events, 'step');
  for (let rank = 0; rank < devices; rank++) {
    assert.equal(
      Math.max(...steps.filter((e) => e.rank === rank).map((e) => e.step as number)),
      stop - 1,
      `device ${rank} ran steps 0 … ${stop - 1}`,
    );
  }
  assert.equal(ofType(events, 'stopped').length, 0);
  assert.deepEqual(
    ofType(events, 'earlyStopped').map((e) => [e.step, e.epoch, e.bestEpoch]),
    [[stop, 2, 0]],
  );
  const tested = ofType(events, 'eval').filter((e) => 'testLoss' in e);
  assert.deepEqual(
    tested.map((e) => e.step),
    [stop],
    'the test set once, at the stop',
  );
  assert.equal(result.testAccuracy, tested[0]!.testAccuracy);
  assert.equal(readCheckpoint(result.checkpoint).metadata.step, String(stop), 'the final checkpoint is of the stop');
  assert.equal(latestCompleteSet(result.runDir)!.state.step, stop, 'a checkpoint set to resume from');
  assert.ok(existsSync(join(result.runDir, 'model-best.safetensors')));
}

test('early stopping on one device: three evaluations without improvement, then the run stops as a graceful stop does', async () => {
  const dir = tmpDir('paratrain-early-');
  const config = evalConfig(dir, STALLED);
  const result = await trainOnData(config, await splitData(config), { out: join(dir, 'run') });
  checkStoppedEarly(result, 1, 36);
});

test('early stopping on two devices (hybrid): both stop after the same step', { timeout: 120_000 }, async () => {
  const dir = tmpDir('paratrain-early-');
  const config = evalConfig(dir, { ...STALLED, train: `${STALLED.train}, devices: 2, strategy: hybrid` });
  const result = await trainOnData(config, await splitData(config), { out: join(dir, 'run') });
  checkStoppedEarly(result, 2, 18);
});

test('crashed before the stop and resumed, a run stops early where the uninterrupted one did, with the same weights', async () => {
  const dir = tmpDir('paratrain-early-');
  const config = evalConfig(dir, STALLED);
  const data = await splitData(config);
  const whole = await trainOnData(config, data, { out: join(dir, 'whole') });
  const runDir = join(dir, 'crashed');
  await assert.rejects(trainOnData(config, data, { out: runDir, failAt: { rank: 0, step: 30 } }), /injected failure/);
  const resumed = await trainOnData(config, data, { resume: runDir });
  assert.deepEqual(resumed.earlyStopped, whole.earlyStopped);
  assertSameTensors(tensorsOf(resumed.checkpoint), tensorsOf(whole.checkpoint));
});

test('holds: the devices wait after each evaluation but the last; a resumed run re-evaluates its first epoch boundary', () => {
  const config = evalConfig(tmpDir('paratrain-early-'), { train: 'epochs: 6, evalEvery: 2, earlyStopping: true' });
  assert.equal(firstHold(config, 10, null), 19, 'after epoch 2 (evalEvery 2)');
  assert.equal(holdAfter(config, 10, 1), 39);
  assert.equal(holdAfter(config, 10, 3), null, 'the last epoch has nothing to stop early');
  const set = (step: number, lastStep?: number): SetState =>
    ({
      step,
      stepsPerEpoch: 10,
      ...(lastStep === undefined
        ? {}
        : {
            tracking: {
              earlyStopping: {
                metric: 'valLoss',
                mode: 'min',
                best: 1,
                bestEpoch: 0,
                bestStep: lastStep,
                wait: 0,
                lastStep,
              },
            },
          }),
    }) as SetState;
  assert.equal(reevaluatesAtStart(config, set(20, 0)), true, "the set at step 20 came before epoch 2's evaluation");
  assert.equal(firstHold(config, 10, set(20, 0)), 19, 'held before the first step until the verdict');
  assert.equal(reevaluatesAtStart(config, set(20, 20)), false, "already recorded (a stop's set)");
  assert.equal(reevaluatesAtStart(config, set(30, 20)), false, 'epoch 3 does not evaluate');
  assert.equal(reevaluatesAtStart(config, set(25, 20)), false, 'mid-epoch');
  assert.equal(firstHold(config, 10, set(25, 20)), 39);
  const off: RunConfig = { ...config, train: { ...config.train, earlyStopping: false, best: false } };
  assert.equal(firstHold(off, 10, null), null);
  assert.equal(reevaluatesAtStart(off, set(20)), false, 'nothing watched, nothing to re-evaluate');
});

test('the stop gate: a hold lets devices run up to it; a release raises it; a stop request freezes within it', async () => {
  const gate = allocateStopGate(2, 4);
  const control = new StopGateControl(gate);
  const a = new StopGateDevice(gate, 0),
    b = new StopGateDevice(gate, 1);
  assert.equal(a.mayStart(4), true);
  const waiting = b.mayStart(5);
  assert.ok(waiting instanceof Promise, 'step 5 waits for the verdict');
  control.release(9);
  assert.equal(await waiting, true);
  assert.equal(a.mayStart(9), true);
  const held = a.mayStart(10);
  assert.equal(control.freeze(), 9, 'a stop freezes at the hold, not at the withdrawn claim beyond it');
  control.release(20);
  control.finalize(control.freeze());
  assert.equal(await held, false);
  assert.equal(control.lastStep, 9);
});
