import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parseConfig } from '../../src/config/index.ts';

const parse = (model: unknown, train: Record<string, unknown>) =>
  parseConfig({ model, train: { devices: 2, ...train } }, 'cfg');
const MLP = { input: [4], layers: [{ dense: { units: 8 } }, { dense: { units: 2 } }] };

test('hybrid.shard: 1, 2 and 3 are taken, 0 is left out of the spec; 4 and the combinations sharding cannot run are refused by name', () => {
  for (const shard of [0, 1, 2, 3]) {
    const spec = parse(MLP, { strategy: { hybrid: { shard } } }).train.strategy;
    assert.deepEqual(spec, { type: 'hybrid', bucketBytes: 4 << 20, ...(shard > 0 ? { shard } : {}) });
  }
  assert.equal((parse(MLP, { strategy: 'hybrid' }).train.strategy as { shard?: number }).shard ?? 0, 0);
  assert.throws(
    () => parse(MLP, { strategy: { hybrid: { shard: 4 } } }),
    /train\.strategy\.hybrid\.shard: a ZeRO stage: use 1 \(optimizer state\), 2 \(\+ gradients\), 3 \(\+ weights, gathered layer by layer\) or 0/,
  );
  for (const backend of ['webgpu'])
    assert.throws(
      () => parse(MLP, { backend, strategy: { hybrid: { shard: 3 } } }),
      /hybrid\.shard 3 needs CPU devices/,
    );
  const split = { input: [4], layers: [{ dense: { units: 8, parallel: 'model' } }, { dense: { units: 2 } }] };
  assert.throws(
    () => parse(split, { strategy: { hybrid: { shard: 1 } } }),
    /train\.strategy: hybrid\.shard 1 shards the optimizer of a whole replica; 'parallel: model' layers split the model instead; use shard: 0/,
  );
  assert.throws(
    () => parse(MLP, { backend: 'webgpu', strategy: { hybrid: { shard: 2 } } }),
    /train\.strategy: hybrid\.shard 2 needs CPU devices .*; use shard: 0 with backend webgpu/,
  );
});
