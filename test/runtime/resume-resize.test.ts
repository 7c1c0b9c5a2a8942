/**
 * Resuming on another number of devices. The job's maths stay the saved run's: the global batch
 * (a per-device batch becomes the saved global one), the data order, the learning rate. Per-device
 * state follows the rule of src/runtime/device/deviceState.ts: device r′ of G′ takes saved device
 * ⌊r′·G/G′⌋'s weights, optimizer slots and strategy state; BatchNorm statistics are averaged.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { tinyConfig } from '../parallel/helpers.ts';
import { train } from '../../src/runtime/run/train.ts';
import { Replica } from '../../src/runtime/device/replica.ts';
import { jsBackend } from '../../src/kernels/js/index.ts';
import { bmufStrategy } from '../../src/parallel/strategies/bmuf.ts';
import { latestCompleteSet } from '../../src/runtime/checkpoint/checkpointSet.ts';
import { restoreDeviceState, sourceDevice } from '../../src/runtime/device/deviceState.ts';
import { readCheckpoint } from '../../src/runtime/checkpoint/checkpoint.ts';
import { readMetrics } from '../../src/runtime/events/metrics.ts';
import type { Communicator } from '../../src/comm/communicator.ts';
import type { RunConfig } from '../../src/config/runConfig.ts';
import { assertSameTensors, freshDir, tensorsOf } from './resumeHelpers.ts';

const on = (config: RunConfig, devices: number): RunConfig => ({ ...config, train: { ...config.train, devices } });

test('the resize rule: device r′ of G′ takes saved device ⌊r′·G/G′⌋', () => {
  assert.deepEqual(
    [0, 1].map((r) => sourceDevice(r, 4, 2)),
    [0, 2],
  );
  assert.deepEqual(
    [0, 1, 2].map((r) => sourceDevice(r, 2, 3)),
    [0, 0, 1],
  );
  assert.deepEqual(
    [0, 1, 2, 3].map((r) => sourceDevice(r, 4, 4)),
    [0, 1, 2, 3],
  );
});

// the summation order of the gradient all-reduce changes with G: equal to within float rounding, accumulated over 12 steps
const TOLERANCE = 2e-5;

test('hybrid saved on 4 devices, resumed on 2, then on 3, ends where 4 devices all along end (tolerance 2e-5)', async () => {
  const config = tinyConfig({
    train: { epochs: 2, devices: 4, strategy: 'hybrid', checkpointEvery: { steps: 2 } },
    data: { trainLimit: 192 },
  });
  const whole = tensorsOf((await train(config, { out: freshDir() })).checkpoint);
  const runDir = freshDir();
  await assert.rejects(train(config, { out: runDir, failAt: { rank: 3, step: 5 } }), /injected failure/);
  await assert.rejects(train(on(config, 2), { resume: runDir, failAt: { rank: 1, step: 9 } }), /injected failure/);
  const last = await train(on(config, 3), { resume: runDir });
  assertSameTensors(whole, tensorsOf(last.checkpoint), TOLERANCE);
  const resumes = readMetrics(join(runDir, 'metrics.jsonl')).filter((e) => e.type === 'resume');
  assert.deepEqual(
    resumes.map((e) => [e.step, e.fromDevices, e.devices]),
    [
      [4, 4, 2],
      [8, 2, 3],
    ],
  );
});

/** A communicator for one device of `size` whose broadcasts leave buffers alone (onStart's start-up only). */
const quietComm = (rank: number, size: number) =>
  ({ rank, size, broadcast: async () => {}, allreduce: async () => {} }) as unknown as Communicator;

test('bmuf saved on 4 devices resumes on 2: block model, momentum and start point carry over, local models follow the rule, the run completes', async () => {
  const config = tinyConfig({
    train: { epochs: 2, devices: 4, strategy: { bmuf: { period: 3 } }, checkpointEvery: { steps: 2 } },
    data: { trainLimit: 192 },
    layers: [
      { conv2d: { filters: 4, kernelSize: 3, strides: 2 } },
      { batchNorm: {} },
      { relu: {} },
      { flatten: {} },
      { dense: { units: 10 } },
    ],
  });
  const runDir = freshDir();
  await assert.rejects(train(config, { out: runDir, failAt: { rank: 0, step: 5 } }), /injected failure/);
  const point = latestCompleteSet(runDir)!;
  assert.equal(point.state.step, 4);
  const saved = [0, 1, 2, 3].map((r) => readCheckpoint(join(point.dir, `device-${r}.safetensors`)).tensors);
  const resized = on(config, 2);
  for (const rank of [0, 1]) {
    const replica = new Replica(jsBackend, resized);
    const strategy = bmufStrategy(quietComm(rank, 2), { period: 3, blockMomentum: 0.5, blockLr: 1, nesterov: false });
    await strategy.onStart!(replica.view());
    restoreDeviceState(point, rank, 2, replica, strategy);
    const from = saved[rank * 2]!;
    assert.deepEqual(
      replica.model.params,
      from.get('params')!.data,
      `device ${rank} starts from saved device ${rank * 2}'s local model`,
    );
    const mean = new Float32Array(replica.model.state.length).map(
      (_, i) => saved.reduce((s, t) => s + t.get('state')!.data[i]!, 0) / 4,
    );
    assert.deepEqual(replica.model.state, mean, 'BatchNorm statistics are the mean over the saved devices');
    const s = strategy.saveState!();
    for (const name of ['theta', 'delta', 'start'])
      assert.deepEqual(s.tensors[name], saved[0]!.get(`strategy.${name}`)!.data, `${name} is the saved job's`);
    assert.equal(s.counters.steps, 1, 'one step into the block, as saved');
  }
  const result = await train(resized, { resume: runDir });
  assert.ok(Number.isFinite(result.testLoss));
  assert.ok([...tensorsOf(result.checkpoint).values()].every((t) => t.every(Number.isFinite)));
});
