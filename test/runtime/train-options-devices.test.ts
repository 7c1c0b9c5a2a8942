/**
 * The library's TrainOptions that depend on devices and processes: onStep sums a step over 2
 * devices; an AbortSignal stops 2 devices at one step; a throwing onEvent with 2 devices (relayed
 * from the device threads' messages) rejects train() with its error instead of killing the
 * process; processes, transport and timeoutMs form a 2-process job (both processes in this test's
 * process). About 8 s of CPU: every device thread compiles the sources (tsx) as it starts.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { train, defineConfig, loadConfig, readMetrics, type StepSummary } from '../../src/index.ts';
import { SUBSET, tmpDir } from '../cli/helpers.ts';
import { randomPort } from './jobHelpers.ts';

/** 64 training images in global batches of 16 (8 per device): 4 steps an epoch. */
const tiny = (epochs = 1, strategy = 'hybrid') =>
  defineConfig({
    model: { input: [28, 28, 1], layers: ['flatten', { dense: { units: 10 } }] },
    optimizer: { sgd: { lr: 0.1 } },
    data: { dir: SUBSET, batchSize: 16, batchSizeScope: 'global', trainLimit: 64, testLimit: 50 },
    train: { epochs, devices: 2, strategy: strategy as 'hybrid', backend: 'js', evalEvery: 0, seed: 5 },
  });

test('2 devices: onStep sums each step over both devices; aborting the signal stops both at one step', async () => {
  const dir = tmpDir('paratrain-options2-'),
    out = join(dir, 'run');
  const controller = new AbortController();
  const steps: StepSummary[] = [];
  const r = await train(tiny(50), {
    out,
    signal: controller.signal,
    onStep: (s) => {
      steps.push(s);
      if (s.step === 2) controller.abort();
    },
  });
  assert.ok(r.stopped, 'stopped');
  assert.equal(r.stopped.signal, 'abort');
  assert.ok(r.stopped.step >= 3 && r.stopped.step < 50 * 4, `stopped soon after the abort (${r.stopped.step})`);
  assert.deepStrictEqual(
    steps.map((s) => s.step),
    Array.from({ length: r.stopped.step }, (_, i) => i),
    'one summary per step, in order',
  );
  assert.ok(steps.every((s) => s.devices === 2 && s.samples === 16));
  // the summary is the sample-weighted mean of the devices' step events
  const events = readMetrics(join(out, 'metrics.jsonl')).filter((e) => e.type === 'step' && e.step === 0);
  const mean = events.reduce((n, e) => n + (e.loss as number) * (e.samples as number), 0) / 16;
  assert.ok(Math.abs(steps[0]!.loss - mean) < 1e-12, `${steps[0]!.loss} vs ${mean}`);
  const last = new Map<number, number>();
  for (const e of readMetrics(join(out, 'metrics.jsonl')))
    if (e.type === 'step') last.set(e.rank as number, e.step as number);
  assert.deepStrictEqual(
    [...last.values()],
    [r.stopped.step - 1, r.stopped.step - 1],
    'both devices ran the same steps',
  );
  assert.ok(existsSync(r.checkpoint));
});

// hybrid, the default (under async the same path stops the devices before any could be taken for lost)
test('2 devices: onEvent throwing rejects train() with that error, the devices stop, the process lives on', async () => {
  const dir = tmpDir('paratrain-options2-'),
    out = join(dir, 'run');
  const boom = new Error('boom from onEvent');
  let calls = 0;
  await assert.rejects(
    train(tiny(50), {
      out,
      onEvent: (e) => {
        calls++;
        if (e.type === 'step' && e.step === 1) throw boom;
      },
    }),
    (e) => e === boom,
  );
  const afterwards = calls;
  await new Promise((r) => setTimeout(r, 200));
  assert.equal(calls, afterwards, 'no event is delivered after the error');
  const events = readMetrics(join(out, 'metrics.jsonl'));
  assert.ok(events.some((e) => e.type === 'start'));
  assert.ok(!events.some((e) => e.type === 'end'), 'the run did not go on to the end');
  assert.ok(events.filter((e) => e.type === 'step').length < 50 * 4 * 2);
});

test('processes, transport and timeoutMs: two processes of one job (both in this test), and a deadline when the other never comes', async () => {
  process.env.PARATRAIN_SECRET ??= 'paratrain-test-secret-0123456789abcdef';
  const dir = tmpDir('paratrain-options2-'),
    out = join(dir, 'run');
  const port = randomPort();
  const one = { ...tiny(), train: { ...tiny().train, devices: 1 } };
  const job = (rank: number) =>
    train(one, {
      out,
      processes: { rank, worldSize: 2, masterAddr: '127.0.0.1', masterPort: port },
      transport: 'tcp',
      timeoutMs: 30_000,
    });
  const [p0, p1] = await Promise.all([job(0), job(1)]);
  assert.equal(p0.runDir, out);
  assert.equal(p1.runDir, '', 'process 1 writes no run directory');
  assert.equal(p0.steps, 4);
  const start = readMetrics(join(out, 'metrics.jsonl')).find((e) => e.type === 'start')!;
  assert.deepStrictEqual([start.devices, start.processes], [2, 2]);
  assert.equal(loadConfig(join(out, 'config.yaml')).train.devices, 1, 'config.yaml keeps the devices of one process');
  // what several devices ask of the config is asked of the job's 2 devices, though train.devices is 1
  await assert.rejects(
    train(
      { ...one, train: { ...one.train, strategy: 'async', syncBatchNorm: true } },
      {
        out: join(dir, 'syncbn'),
        processes: { rank: 0, worldSize: 2, masterAddr: '127.0.0.1', masterPort: randomPort() },
        timeoutMs: 1500,
      },
    ),
    /train\.syncBatchNorm: syncBatchNorm needs devices that step together .*strategy async runs them at their own pace/,
  );
  // transport is used: mpi runs one device per process
  await assert.rejects(
    train(tiny(), {
      out: join(dir, 'mpi'),
      processes: { rank: 0, worldSize: 2, masterAddr: '127.0.0.1', masterPort: port },
      transport: 'mpi',
    }),
    /transport mpi: each process runs one device/,
  );
  // timeoutMs: process 1 never comes
  const t0 = performance.now();
  await assert.rejects(
    train(one, {
      out: join(dir, 'alone'),
      processes: { rank: 0, worldSize: 2, masterAddr: '127.0.0.1', masterPort: randomPort() },
      timeoutMs: 1500,
    }),
    /timed out|time|did not/i,
  );
  assert.ok(performance.now() - t0 < 20_000, 'the deadline was the one given');
});
