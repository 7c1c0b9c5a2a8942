import { test } from 'node:test';
import assert from 'node:assert/strict';
import { tinyConfig, trainAndReadWeights } from './helpers.ts';

// (async and asynchronous EASGD go on without a device other than 0 that dies: test/runtime/lost-devices.test.ts)
test('a device that throws stops the whole run with its rank and error, for every strategy — never a hang', {
  timeout: 120_000,
}, async () => {
  for (const strategy of ['hybrid', 'sync', 'bsp', 'easgd', 'bmuf']) {
    const t0 = Date.now();
    await assert.rejects(
      trainAndReadWeights(tinyConfig({ train: { devices: 3, strategy } }), { failAt: { rank: 1, step: 2 } }),
      /device 1 failed: injected failure at step 2/,
      strategy,
    );
    assert.ok(Date.now() - t0 < 20_000, `${strategy}: the failure took ${Date.now() - t0} ms to surface`);
  }
});

test('per-strategy options that depend on the device count are checked before any device starts', async () => {
  await assert.rejects(
    trainAndReadWeights(tinyConfig({ train: { devices: 4, strategy: { easgd: { alpha: 0.3 } } } })),
    /train\.strategy\.easgd\.alpha: synchronous EASGD needs alpha·devices < 1.*use alpha < 0\.25/,
  );
});

test('a diverging run stops with a clear error naming the step and the fix', async () => {
  await assert.rejects(
    trainAndReadWeights(tinyConfig({ optimizer: { sgd: { lr: 1e30 } } })),
    /training diverged: the loss is (NaN|Infinity) at step \d+ \(epoch 1\) on device 0; lower optimizer\.lr \(now 1e\+30\)/,
  );
});
