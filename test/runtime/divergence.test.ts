/**
 * The divergence guard end to end: a finite blow-up (lr 1e4) stops the run with one error naming
 * the device, the steps, the loss, the best and the fix, under every kind of strategy; the examples'
 * healthy runs are never stopped.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { train, loadConfig, readMetrics } from '../../src/index.ts';
import type { RunConfig } from '../../src/config/runConfig.ts';

const SUBSET = new URL('../../data/fashion-mnist-subset/', import.meta.url).pathname;
const MLP = new URL('../../examples/mlp.yaml', import.meta.url).pathname;
const outDir = () => join(mkdtempSync(join(tmpdir(), 'paratrain-diverge-')), 'run');

/** The guard's streak here: shorter than the default 50, so that a blow-up is decided in fewer steps. */
const STREAK = 25;

/** examples/mlp.yaml on 512 samples, 16 per device: 16 steps an epoch on 2 devices, at lr 1e4; a streak of STREAK steps. */
function blowUpConfig(optimizer: 'sgd' | 'adam'): RunConfig {
  const config = loadConfig(MLP);
  config.train.divergence = { factor: 100, steps: STREAK };
  config.data.trainLimit = 512;
  config.data.testLimit = 100;
  config.data.batchSize = 16;
  config.optimizer =
    optimizer === 'sgd'
      ? { type: 'sgd', lr: 1e4, momentum: 0, nesterov: false, weightDecay: 0 }
      : { ...config.optimizer, lr: 1e4 };
  return config;
}

const cases = [
  ['hybrid', 'sgd'],
  ['hybrid', 'adam'],
  ['async', 'sgd'],
  ['async', 'adam'],
  ['bmuf', 'sgd'],
  ['sync', 'sgd'],
] as const;

for (const [strategy, optimizer] of cases) {
  test(`${strategy}, 2 devices, ${optimizer} at lr 1e4: the finite blow-up stops the run after train.divergence.steps steps, naming the device, the loss, the best and the fix`, async () => {
    const out = outDir();
    const run = train(blowUpConfig(optimizer), { devices: 2, strategy, epochs: 6, dataDir: SUBSET, out });
    let message = '';
    await assert.rejects(run, (err: Error) => {
      message = err.message;
      return true;
    });
    assert.match(
      message,
      new RegExp(
        String.raw`^device ([01]) failed: training diverged: device \1's training loss, smoothed over about 10 steps, stayed above 100 × its best \(and its first loss\) for ${STREAK} steps in a row \(steps \d+–(\d+)\): at step \2 \(epoch \d\) the loss is \S+ \(smoothed \S+\), its best \S+ \(smoothed, step \d+\); lower optimizer\.lr \(now 10000\) or clip the gradients \(train\.clipGradNorm\)`,
      ),
    );
    // the device that diverged stopped at the step it names, well before the 6 epochs' 96 steps; no end event
    const [, device, last] = /^device (\d) .*\(steps \d+–(\d+)\)/.exec(message)!;
    const events = readMetrics(join(out, 'metrics.jsonl'));
    const its = events.filter((e) => e.type === 'step' && e.rank === Number(device));
    assert.equal(its.length, Number(last));
    assert.ok(its.length >= STREAK && its.length < STREAK + 20, `${its.length} steps ran`);
    assert.equal(
      events.some((e) => e.type === 'end'),
      false,
    );
  });
}

test('examples/mlp.yaml on the shipped subset, as it is (2 epochs, Adam at 0.001): the guard on by default never fires', async () => {
  const config = loadConfig(MLP);
  assert.deepEqual(config.train.divergence, { factor: 100, steps: 50 }, 'on by default');
  const result = await train(config, { dataDir: SUBSET, out: outDir() });
  assert.ok(result.testAccuracy > 0.6, `trained: accuracy ${result.testAccuracy}`);
});
