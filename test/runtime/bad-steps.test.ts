import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { train, loadConfig, readMetrics, readCheckpoint } from '../../src/index.ts';
import { FaultPlan } from '../../src/runtime/faults/faultPlan.ts';
import { loadReportRuns, summaryTable } from '../../src/report/index.ts';
import type { RunConfig } from '../../src/config/runConfig.ts';

const SUBSET = new URL('../../data/fashion-mnist-subset/', import.meta.url).pathname;
const MLP = new URL('../../examples/mlp.yaml', import.meta.url).pathname;

function tinyConfig(): RunConfig {
  const config = loadConfig(MLP);
  config.data.trainLimit = 512;
  config.data.testLimit = 100;
  return config;
}

function finiteWeights(path: string): boolean {
  for (const t of readCheckpoint(path).tensors.values()) if (!t.data.every(Number.isFinite)) return false;
  return true;
}

const outDir = () => join(mkdtempSync(join(tmpdir(), 'paratrain-bad-')), 'run');

test('Adam at lr 1000 on a deep tiny MLP: NaN steps are skipped, and after exactly maxBadSteps in a row the run stops naming the device and the layer; the last good checkpoint stays', async () => {
  const config = tinyConfig();
  // ten hidden dense layers: at lr 1000 their outputs overflow float32 from the second step on
  const [flatten, hidden, , last] = config.model.layers;
  config.model.layers = [
    flatten!,
    ...(Array.from({ length: 10 }, () => ({ ...hidden!, units: 32 })) as typeof config.model.layers),
    last!,
  ];
  config.optimizer.lr = 1000;
  config.train.checkpointEvery = 1;
  config.train.maxBadSteps = 10;
  const out = outDir();
  await assert.rejects(
    train(config, { epochs: 3, dataDir: SUBSET, out }),
    /training diverged: the loss is NaN at step \d+ \(epoch 2\) on device 0; lower optimizer\.lr \(now 1000\) .*: 10 steps in a row \(steps \d+–\d+\) were skipped because non-finite values first appeared on device 0 in the output of model\.layers\[\d+\] dense; the newest checkpoint set is .*step-00000008 \(step 8\)$/,
  );
  const steps = readMetrics(join(out, 'metrics.jsonl')).filter((e) => e.type === 'step');
  const skipped = steps.filter((e) => e.skipped === true);
  assert.equal(skipped.length, 10, 'exactly maxBadSteps skipped steps, then the stop');
  assert.equal(steps[steps.length - 1]!.badSteps, 10);
  assert.ok(steps.length > 10 && steps[0]!.skipped === undefined, 'the first step was applied');
  // the epoch-1 checkpoint was written before the stop (8 steps per epoch) and holds no NaN: the stop did not overwrite it
  const ckpt = join(out, 'model.safetensors');
  assert.ok(existsSync(ckpt));
  assert.equal(readCheckpoint(ckpt).metadata.epoch, '1');
  assert.ok(finiteWeights(ckpt));
});

test('a run that diverges before its first checkpoint set says there is none to resume from', async () => {
  const config = tinyConfig();
  const [flatten, hidden, , last] = config.model.layers;
  config.model.layers = [
    flatten!,
    ...(Array.from({ length: 10 }, () => ({ ...hidden!, units: 32 })) as typeof config.model.layers),
    last!,
  ];
  config.optimizer.lr = 1000;
  // sets only at the end of the run: none before the stop
  config.train.checkpointEvery = 0;
  config.train.maxBadSteps = 3;
  const out = outDir();
  await assert.rejects(
    train(config, { epochs: 3, dataDir: SUBSET, out }),
    /training diverged: .*; no checkpoint set was written before the stop, so there is nothing to resume: after the fix, start the run again$/,
  );
  assert.ok(!existsSync(join(out, 'checkpoints')), 'indeed no set');
});

for (const strategy of ['hybrid', 'bsp', 'async'] as const) {
  test(`${strategy}, 2 devices: one injected NaN gradient on device 1 at step 2 is skipped${strategy === 'async' ? ' by that device, the server is not poisoned' : ' on both devices alike'}; the counter says 1`, async () => {
    const config = tinyConfig();
    const out = outDir();
    const result = await train(config, {
      devices: 2,
      strategy,
      epochs: 1,
      dataDir: SUBSET,
      out,
      faults: new FaultPlan({ nan: [[1, 2]] }),
    });
    const events = readMetrics(join(out, 'metrics.jsonl'));
    const skipped = events.filter((e) => e.type === 'step' && e.skipped === true);
    const expected =
      strategy === 'async'
        ? [[1, 2]]
        : [
            [0, 2],
            [1, 2],
          ];
    assert.deepEqual(skipped.map((e) => [e.rank, e.step]).sort(), expected);
    const epoch = events.find((e) => e.type === 'epoch')!;
    assert.equal(epoch.badSteps, 1);
    assert.ok(finiteWeights(result.checkpoint), 'no NaN reached the weights');
    assert.ok(result.testAccuracy > 0.4, `the run trained on: accuracy ${result.testAccuracy}`);
    // `paratrain report` shows the count in its summary table
    const [header, , row] = summaryTable(loadReportRuns([out])).split('\n');
    assert.match(header!, /bad steps +run$/);
    assert.match(row!, / 1 {2}\S+ ×2 \(run\)$/);
  });
}

test("hybrid, 2 devices, model-parallel dense layers: a NaN in device 1's shard gradient skips the step on both devices; in a row they stop the run naming device 1 and its shard", async () => {
  const config = tinyConfig();
  // the first dense layer after the replicated one is split between the devices; its shard's gradient is never reduced
  const [flatten, hidden, , last] = config.model.layers as [
    RunConfig['model']['layers'][number],
    { units: number },
    unknown,
    { units: number },
  ];
  config.model.layers = [
    flatten,
    { ...hidden, units: 16 },
    { ...hidden, units: 12, parallel: 'model' },
    { ...last, parallel: 'model' },
  ] as RunConfig['model']['layers'];
  config.data.trainLimit = 256;
  config.data.batchSize = 16;
  config.train.maxBadSteps = 2;
  const out = outDir();
  const faults = new FaultPlan({
    nan: [
      [1, 2, 'shard'],
      [1, 3, 'shard'],
    ],
  });
  await assert.rejects(
    train(config, { devices: 2, strategy: 'hybrid', epochs: 1, dataDir: SUBSET, out, faults }),
    /training diverged: the gradients are non-finite at step 4 .*: 2 steps in a row \(steps 3–4\) were skipped because non-finite values first appeared on device 1 in the gradient of its shard of layers\.2\.kernel/,
  );
  const skipped = readMetrics(join(out, 'metrics.jsonl')).filter((e) => e.type === 'step' && e.skipped === true);
  assert.deepEqual(
    skipped.map((e) => [e.rank, e.step]).sort(),
    [
      [0, 2],
      [0, 3],
      [1, 2],
      [1, 3],
    ],
    'both devices skipped steps 2 and 3',
  );
});
