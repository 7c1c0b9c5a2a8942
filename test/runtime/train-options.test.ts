/**
 * The library's train(config, options) on one device: the config as a YAML-shaped object, a
 * RunConfig or a path; every TrainOptions field does what it says (the device-count dependent ones
 * are in train-options-devices.test.ts); unknown keys and wrong values are errors naming them,
 * found before the run directory exists.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { stringify } from 'yaml';
import {
  train,
  defineConfig,
  loadConfig,
  readMetrics,
  FaultPlan,
  ConfigError,
  type StepSummary,
  type EpochSummary,
  type ConfigInput,
} from '../../src/index.ts';
import { SUBSET, tmpDir } from '../cli/helpers.ts';

/** 64 training images, 4 steps of 16 an epoch, a linear model: about a second per run. */
const tiny = (epochs = 1) =>
  defineConfig({
    model: { input: [28, 28, 1], layers: ['flatten', { dense: { units: 10 } }] },
    optimizer: { sgd: { lr: 0.1 } },
    data: { dir: SUBSET, batchSize: 16, trainLimit: 64, testLimit: 50 },
    train: { epochs, backend: 'js', evalEvery: 0, seed: 5 },
  });

const rejects = async (p: Promise<unknown>, pattern: RegExp) => {
  await assert.rejects(p, (e: Error) => {
    assert.match(e.message, pattern);
    return true;
  });
};

test('the config as a YAML-shaped object, a RunConfig or a YAML path: the same run', async () => {
  const dir = tmpDir('paratrain-options-');
  const file = join(dir, 'tiny.yaml');
  writeFileSync(file, stringify(tiny()));
  const a = await train(tiny(), { out: join(dir, 'object') });
  const b = await train(loadConfig(file), { out: join(dir, 'runconfig') });
  const c = await train(file, { out: join(dir, 'path') });
  assert.equal(a.steps, 4);
  assert.deepStrictEqual([b.testAccuracy, b.testLoss], [a.testAccuracy, a.testLoss]);
  assert.deepStrictEqual([c.testAccuracy, c.testLoss], [a.testAccuracy, a.testLoss]);
});

test('a bad config object gets the messages a YAML file gets, and nothing is written', async () => {
  const dir = tmpDir('paratrain-options-'),
    out = join(dir, 'run');
  const bad = { model: { input: [28, 28, 1], layers: [{ dense: { unit: 10 } }] } } as unknown as ConfigInput;
  await rejects(
    train(bad, { out }),
    /^config: model\.layers\[0\]\.dense\.units: missing; expected a positive integer\nconfig: model\.layers\[0\]\.dense: unknown option 'unit' \(did you mean 'units'\?\)/,
  );
  // the report: a YAML-shaped object used to fail with "Cannot destructure property 'type' of 'spec'"
  await rejects(
    train({ model: { input: [28, 28, 1], layers: [{ dens: { units: 10 } }] } } as unknown as ConfigInput, { out }),
    /config: model\.layers\[0\]: unknown layer type 'dens' \(did you mean 'dense'\?\)/,
  );
  assert.ok(!existsSync(out));
});

test('a bad PARATRAIN_SHM_SPIN is refused naming it, before any file is written', async (t) => {
  const dir = tmpDir('paratrain-options-'),
    out = join(dir, 'run');
  const saved = process.env.PARATRAIN_SHM_SPIN;
  t.after(() => {
    if (saved === undefined) delete process.env.PARATRAIN_SHM_SPIN;
    else process.env.PARATRAIN_SHM_SPIN = saved;
  });
  process.env.PARATRAIN_SHM_SPIN = 'fast';
  await rejects(
    train(tiny(), { out }),
    /^PARATRAIN_SHM_SPIN: expected a number of µs ≥ 0 or 'adaptive', got 'fast'; unset it for the default$/,
  );
  assert.ok(!existsSync(out));
});

test('unknown option keys and wrong values are errors naming them (with the close match), before any work', async () => {
  const dir = tmpDir('paratrain-options-'),
    out = join(dir, 'run');
  const opts = (o: object) => o as Parameters<typeof train>[1];
  await rejects(
    train(tiny(), opts({ out, epoch: 1 })),
    /^train options: unknown option 'epoch' \(did you mean 'epochs'\?\); allowed: out, force, onEvent, onStep, onEpoch/,
  );
  await rejects(
    train(tiny(), opts({ out, onevent: () => {} })),
    /unknown option 'onevent' \(did you mean 'onEvent'\?\)/,
  );
  await rejects(train(tiny(), opts({ out, signal: 'SIGINT' })), /train options: signal: expected an AbortSignal/);
  await rejects(train(tiny(), opts({ out, onStep: 1 })), /train options: onStep: expected a function, got 1/);
  await rejects(train(tiny(), opts({ out, failAt: 3 })), /train options: failAt: expected \{ rank, step \}, got 3/);
  await rejects(
    train(tiny(), opts({ out, transport: 'udp' })),
    /train options: transport: expected 'tcp' or 'mpi', got 'udp'/,
  );
  await rejects(
    train(tiny(), { out, transport: 'tcp' }),
    /train options: transport applies to a job of several processes; give processes/,
  );
  await rejects(
    train(tiny(), { out, timeoutMs: 1000 }),
    /train options: timeoutMs applies to a job of several processes/,
  );
  // config overrides are validated like the config, named by their key
  await rejects(train(tiny(), { out, epochs: 0 }), /^train options: epochs: expected a positive integer, got 0/);
  await rejects(
    train(tiny(), { out, strategy: 'bmufx' }),
    /train options: strategy: unknown strategy 'bmufx' \(did you mean 'bmuf'\?\)/,
  );
  await assert.rejects(train(tiny(), opts({ out, epoch: 1 })), ConfigError);
  assert.ok(!existsSync(out), 'no run directory was made');
});

test('overrides, out and force: overrides change the run; an existing run directory needs force', async () => {
  const dir = tmpDir('paratrain-options-'),
    out = join(dir, 'run');
  const first = await train(tiny(), {
    out,
    epochs: 2,
    batchSize: 32,
    lr: 0.05,
    seed: 9,
    backend: 'js',
    dataDir: SUBSET,
  });
  assert.equal(first.runDir, out);
  assert.equal(first.steps, 4, '2 epochs of 2 steps of 32');
  const saved = loadConfig(join(out, 'config.yaml'));
  assert.deepStrictEqual(
    [saved.train.epochs, saved.data.batchSize, saved.optimizer.lr, saved.train.seed],
    [2, 32, 0.05, 9],
  );
  await rejects(train(tiny(), { out }), /not empty|non-empty|--force/);
  const again = await train(tiny(), { out, force: true });
  assert.equal(again.steps, 4);
});

test('onEvent, onStep and onEpoch see the run; log gets the notes; resume and initFrom continue or start from a checkpoint', async () => {
  const dir = tmpDir('paratrain-options-'),
    out = join(dir, 'run');
  const events: string[] = [],
    steps: StepSummary[] = [],
    epochs: EpochSummary[] = [];
  const r = await train(tiny(2), {
    out,
    onEvent: (e) => events.push(e.type),
    onStep: (s) => steps.push(s),
    onEpoch: (e) => epochs.push(e),
  });
  assert.equal(events[0], 'start');
  assert.equal(events.at(-1), 'end');
  assert.deepStrictEqual(
    steps.map((s) => s.step),
    [0, 1, 2, 3, 4, 5, 6, 7],
  );
  assert.ok(
    steps.every((s) => s.devices === 1 && s.samples === 16 && s.stepsPerEpoch === 4 && s.loss > 0 && s.lr === 0.1),
  );
  const metricSteps = readMetrics(join(out, 'metrics.jsonl')).filter((e) => e.type === 'step');
  assert.deepStrictEqual(
    steps.map((s) => s.loss),
    metricSteps.map((e) => e.loss),
    "onStep losses are the metrics file's",
  );
  assert.deepStrictEqual(
    epochs.map((e) => [e.epoch, e.samples]),
    [
      [0, 64],
      [1, 64],
    ],
  );
  assert.equal(r.steps, 8);

  // resume: a leftover of a dead writer is removed (and logged); 2 more epochs continue from step 8
  writeFileSync(join(out, 'model.safetensors.tmp-999999'), 'x');
  const notes: string[] = [];
  const resumed = await train(tiny(4), { resume: out, log: (m) => notes.push(m), onStep: (s) => steps.push(s) });
  assert.ok(
    notes.some((m) => m.includes('removed what an interrupted run left')),
    notes.join('\n'),
  );
  assert.deepStrictEqual(
    steps.slice(8).map((s) => s.step),
    [8, 9, 10, 11, 12, 13, 14, 15],
  );
  assert.equal(resumed.runDir, out);
  assert.ok(readMetrics(join(out, 'metrics.jsonl')).some((e) => e.type === 'resume'));

  // initFrom: a new run from the checkpoint's weights (its first loss is the trained model's, not a fresh one's)
  const fresh: StepSummary[] = [],
    tuned: StepSummary[] = [];
  await train(tiny(), { out: join(dir, 'fresh'), onStep: (s) => fresh.push(s) });
  await train(tiny(), {
    out: join(dir, 'tuned'),
    initFrom: join(out, 'model.safetensors'),
    onStep: (s) => tuned.push(s),
  });
  assert.ok(tuned[0]!.loss < fresh[0]!.loss, `fine-tuned first loss ${tuned[0]!.loss} < fresh ${fresh[0]!.loss}`);
});

test('a callback that throws rejects train() with its error; the run directory stays readable', async () => {
  const dir = tmpDir('paratrain-options-'),
    out = join(dir, 'run');
  const boom = new Error('boom in onStep');
  await assert.rejects(
    train(tiny(), {
      out,
      onStep: (s) => {
        if (s.step === 1) throw boom;
      },
    }),
    (e) => e === boom,
  );
  assert.ok(existsSync(join(out, 'config.yaml')));
  const events = readMetrics(join(out, 'metrics.jsonl'));
  assert.equal(events.filter((e) => e.type === 'step').length, 2, 'the run stopped at the step whose callback threw');
  assert.ok(readFileSync(join(out, 'metrics.jsonl'), 'utf8').endsWith('\n'));
});

test('signal: aborting stops one device early with a checkpoint; result.stopped names the reason', async () => {
  const dir = tmpDir('paratrain-options-');
  const controller = new AbortController();
  const r = await train(tiny(5), {
    out: join(dir, 'a'),
    signal: controller.signal,
    onStep: (s) => {
      if (s.step === 2) controller.abort();
    },
  });
  // steps 0 … 2 ran, in epoch 0 (0-based, as onEpoch and the events count)
  assert.deepStrictEqual(r.stopped, { step: 3, epoch: 0, signal: 'abort' });
  assert.equal(r.steps, 3);
  assert.ok(existsSync(r.checkpoint));
  // a signal aborted before the start stops at once; the reason names a signal when it is one
  const r2 = await train(tiny(5), { out: join(dir, 'b'), signal: AbortSignal.abort('SIGINT') });
  assert.equal(r2.stopped?.signal, 'SIGINT');
  assert.equal(r2.stopped?.step, 0);
});

test('faults, slowDevices and failAt reach the devices (checked against the device count; failAt fails that step)', async () => {
  const dir = tmpDir('paratrain-options-');
  await rejects(
    train(tiny(), { out: join(dir, 'a'), slowDevices: new Map([[3, 2]]) }),
    /slowDevices: there is no device 3 among 1/,
  );
  await rejects(
    train(tiny(), { out: join(dir, 'b'), faults: new FaultPlan({ fail: [[2, 1]] }) }),
    /failAt: there is no device 2 among 1/,
  );
  await rejects(train(tiny(), { out: join(dir, 'c'), failAt: { rank: 0, step: 2 } }), /step 2/);
  const steps = readMetrics(join(dir, 'c', 'metrics.jsonl')).filter((e) => e.type === 'step');
  assert.equal(steps.length, 2, 'steps 0 and 1 ran, step 2 failed');
  const slow = await train(tiny(), { out: join(dir, 'd'), slowDevices: new Map([[0, 1.5]]) });
  assert.equal(slow.steps, 4);
});
