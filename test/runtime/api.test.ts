import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, existsSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse, stringify } from 'yaml';
import { train, loadConfig, readMetrics, readCheckpoint } from '../../src/index.ts';
import { runCli } from '../cli/helpers.ts';
import { assertClose } from '../util/close.ts';

const SUBSET = new URL('../../data/fashion-mnist-subset/', import.meta.url).pathname;
const MLP = new URL('../../examples/mlp.yaml', import.meta.url).pathname;

test('library API: train(loadConfig(...), overrides) as in the README; its figures agree with the metrics file and with eval of the checkpoint', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'paratrain-api-'));
  const out = join(dir, 'run');
  const config = loadConfig(MLP);
  config.data.trainLimit = 512;
  config.data.testLimit = 200;
  const wallStart = performance.now();
  const result = await train(config, { devices: 2, strategy: 'bmuf', epochs: 1, dataDir: SUBSET, out });
  const wallSeconds = (performance.now() - wallStart) / 1000;
  assert.ok(result.testAccuracy > 0.3 && result.testAccuracy <= 1, `accuracy ${result.testAccuracy}`);

  const events = readMetrics(join(out, 'metrics.jsonl'));
  const start = events.find((e) => e.type === 'start')!;
  const end = events.find((e) => e.type === 'end')!;
  const evals = events.filter((e) => e.type === 'eval');
  const steps = events.filter((e) => e.type === 'step');
  assert.equal(start.devices, 2);
  assert.equal(start.strategy, 'bmuf');
  assert.equal(start.trainSamples, 512);
  assert.equal(start.epochs, 1);
  assert.equal(steps.length, 2 * Math.ceil(512 / 128));
  assert.equal(
    steps.reduce((n, e) => n + (e.samples as number), 0),
    512,
    'every training sample seen once in the epoch',
  );

  // throughput: every sample of every epoch over the run's time, which lies inside the call's wall time
  assert.ok(
    result.seconds > 0 && result.seconds <= wallSeconds,
    `run ${result.seconds} s within the call's ${wallSeconds} s`,
  );
  assertClose([result.samplesPerSecond], [(512 * 1) / result.seconds], {
    rtol: 1e-12,
    atol: 0,
    what: 'samples/s = trainSamples·epochs/seconds',
  });
  assert.equal(end.samplesPerSecond, result.samplesPerSecond, 'the metrics file reports the same throughput');
  assert.equal(end.seconds, result.seconds);

  // accuracy: the last evaluation in the metrics file, the end event, and eval of the checkpoint agree
  const lastEval = evals[evals.length - 1]!;
  assert.equal(lastEval.testAccuracy, result.testAccuracy);
  assert.equal(lastEval.testLoss, result.testLoss);
  assert.equal(end.testAccuracy, result.testAccuracy);
  assert.ok(existsSync(result.checkpoint));
  const ckpt = readCheckpoint(result.checkpoint);
  assert.equal(JSON.parse(ckpt.metadata.config!).train.strategy.type, 'bmuf');
  const yaml = parse(readFileSync(MLP, 'utf8')) as { data?: Record<string, unknown> };
  yaml.data = { ...yaml.data, testLimit: 200 };
  const evalConfig = join(dir, 'mlp.yaml');
  writeFileSync(evalConfig, stringify(yaml));
  const e = await runCli(['eval', evalConfig, '--checkpoint', result.checkpoint, '--data', SUBSET]);
  assert.equal(e.code, 0, e.stderr);
  const evaluated = JSON.parse(e.stdout.trim()) as { testSamples: number; testLoss: number; testAccuracy: number };
  assert.equal(evaluated.testSamples, 200);
  assert.equal(evaluated.testAccuracy, result.testAccuracy, 'eval of the checkpoint gives the accuracy train reported');
  assertClose([evaluated.testLoss], [result.testLoss], {
    rtol: 1e-6,
    atol: 0,
    what: 'test loss, eval of the checkpoint vs train',
  });
});
