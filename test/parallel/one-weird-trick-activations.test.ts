import { test } from 'node:test';
import assert from 'node:assert/strict';
import { jsBackend } from '../../src/kernels/js/index.ts';
import { runDevice } from '../../src/runtime/job/deviceRun.ts';
import { loadData } from '../../src/runtime/run/train.ts';
import { hybridStrategy } from '../../src/parallel/strategies/hybrid.ts';
import type { TrainEvent } from '../../src/runtime/events/events.ts';
import { tinyConfig } from './helpers.ts';
import { localGroup } from './localGroup.ts';

// A model-parallel run counts the activations its layers keep for backward, like a data-parallel
// one. The section here: flatten, then a column-parallel dense (16 units, relu: 8 per device) whose
// input is all-gathered, then a row-parallel dense (10 units, linear) whose input is the column
// layer's output shard. Per device, backward needs the gathered input (B × 784 floats: the whole
// batch's) and the relu output shard (B × 8), which the row layer keeps as its input — counted once.
test('a model-parallel run on 2 devices reports the activation bytes its section keeps for backward', async () => {
  const devices = 2,
    perDevice = 8,
    B = devices * perDevice;
  const config = tinyConfig({
    layers: [
      { flatten: {} },
      { dense: { units: 16, activation: 'relu', parallel: 'model' } },
      { dense: { units: 10, parallel: 'model' } },
    ],
    data: { batchSize: perDevice, trainLimit: 96 },
    train: { epochs: 1, backend: 'js', devices, strategy: 'hybrid' },
  });
  const data = await loadData(config);
  const events: TrainEvent[][] = [[], []];
  await Promise.all(
    localGroup(devices).map((comm) =>
      runDevice({
        config,
        rank: comm.rank,
        worldSize: devices,
        backend: jsBackend,
        comm,
        strategy: hybridStrategy(comm, 1 << 20),
        train: data.train,
        test: null,
        checkpointPath: null,
        emit: (e) => events[comm.rank]!.push(e),
        shared: false,
      }),
    ),
  );
  const f32 = 4;
  // at least the section's gathered input; at most that plus every layer's output for the whole batch
  const lower = B * 784 * f32,
    upper = B * (784 + 16 + 10) * f32;
  for (const [rank, list] of events.entries()) {
    const steps = list.filter((e) => e.type === 'step') as Extract<TrainEvent, { type: 'step' }>[];
    assert.equal(steps.length, 96 / B, `rank ${rank}: one event per step`);
    for (const s of steps) {
      assert.ok(
        s.activationBytes! >= lower && s.activationBytes! <= upper,
        `rank ${rank} step ${s.step}: activationBytes ${s.activationBytes} outside [${lower}, ${upper}]`,
      );
    }
    // exactly: the gathered input and this device's half of the hidden units
    assert.equal(steps[0]!.activationBytes, B * (784 + 8) * f32, `rank ${rank}`);
  }
});
