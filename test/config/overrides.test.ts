import { test } from 'node:test';
import assert from 'node:assert/strict';
import { fileURLToPath } from 'node:url';
import { loadConfig, parseConfig, applyOverrides, ConfigError } from '../../src/config/index.ts';

const mnist = () => loadConfig(fileURLToPath(new URL('../../examples/mnist-small.yaml', import.meta.url)));

test('overrides replace the named fields and nothing else', () => {
  const c = mnist();
  const before = structuredClone(c);
  const o = applyOverrides(c, {
    epochs: 5,
    batchSize: 32,
    lr: 0.01,
    seed: 9,
    devices: 4,
    strategy: 'easgd',
    backend: 'js',
    dataDir: '/data/fm',
  });
  assert.deepStrictEqual(c, before, 'the input config is not modified');
  assert.deepStrictEqual(o, {
    ...before,
    optimizer: { ...before.optimizer, lr: 0.01 },
    data: { ...before.data, batchSize: 32, dir: '/data/fm' },
    train: {
      ...before.train,
      epochs: 5,
      seed: 9,
      devices: 4,
      backend: 'js',
      strategy: { type: 'easgd', alpha: 0.1, period: 1, mode: 'sync' },
    },
  });
  assert.deepStrictEqual(applyOverrides(c, {}), c);
});

test('overrides accept numbers as strings, as a CLI parser gives them', () => {
  const o = applyOverrides(mnist(), { epochs: '3', lr: '1e-4', devices: '2' });
  assert.equal(o.train.epochs, 3);
  assert.equal(o.optimizer.lr, 1e-4);
  assert.equal(o.train.devices, 2);
});

test('--lr sets the lr of whichever optimizer is configured', () => {
  const sgd = parseConfig({
    model: { input: [4], layers: [{ dense: { units: 2 } }] },
    optimizer: { sgd: { lr: 0.1, momentum: 0.9 } },
  });
  assert.deepStrictEqual(applyOverrides(sgd, { lr: 0.5 }).optimizer, {
    type: 'sgd',
    lr: 0.5,
    momentum: 0.9,
    nesterov: false,
    weightDecay: 0,
  });
});

test('--strategy takes a bare name with defaults, keeping options when it names the configured strategy', () => {
  const c = parseConfig({
    model: { input: [4], layers: [{ dense: { units: 2 } }] },
    train: { strategy: { bmuf: { period: 8 } } },
  });
  assert.deepStrictEqual(applyOverrides(c, { strategy: 'bsp' }).train.strategy, { type: 'bsp', period: 1 });
  assert.deepStrictEqual(applyOverrides(c, { strategy: 'bmuf' }).train.strategy, {
    type: 'bmuf',
    period: 8,
    blockLr: 1,
    nesterov: false,
  });
});

test('bad overrides are reported against the flag', () => {
  assert.throws(
    () => applyOverrides(mnist(), { epochs: 0, lr: 'fast', strategy: 'bmfu', backend: 'gpu', devices: -1 }),
    (e: unknown) => {
      assert.ok(e instanceof ConfigError);
      assert.deepStrictEqual(e.issues, [
        "command line: --lr: expected a positive number, got 'fast'",
        'command line: --epochs: expected a positive integer, got 0',
        'command line: --devices: expected a positive integer, got -1',
        "command line: --strategy: unknown strategy 'bmfu' (did you mean 'bmuf'?); expected one of sync, async, hybrid, bsp, easgd, bmuf, diloco",
        "command line: --backend: expected one of js, wasm, native, onednn, webgpu, auto, got 'gpu'",
      ]);
      return true;
    },
  );
});

test('an override that breaks a cross-field rule is caught', () => {
  const c = parseConfig({
    model: { input: [4], layers: [{ dense: { units: 2 } }] },
    data: { batchSize: 64, batchSizeScope: 'global' },
  });
  assert.equal(applyOverrides(c, { devices: 4 }).train.devices, 4);
  assert.throws(
    () => applyOverrides(c, { devices: 3 }),
    (e: unknown) =>
      e instanceof ConfigError &&
      e.message ===
        'command line: data.batchSize: with batchSizeScope: global the batch is split across train.devices (3), so it must be a multiple of 3, got 64',
  );
});
