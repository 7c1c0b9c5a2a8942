/**
 * ZeRO stage 3 with `rowBlockBytes`: a dense layer larger than the bound is gathered a block of
 * kernel rows at a time (sharding/rowBlocks.ts, nn/denseRowBlocks.ts). Trained by `train()` on
 * device threads (shared memory): mnist-small, whose dense layer is 91% of its weights, equals
 * unsharded hybrid on 2 and 4 devices up to float32 rounding (forward adds the blocks' products one
 * after another), with micro-batches, clipping and an evaluation mid-run too, and so does
 * deepspeech-small (dense layers on frames); a frozen split layer stays as it started; the layout's
 * pieces and the blocks' rows come out as planned; rowBlockBytes without stage 3 is refused.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { train } from '../../src/runtime/run/train.ts';
import { loadConfig } from '../../src/config/load.ts';
import type { RunConfig } from '../../src/config/runConfig.ts';
import { parseConfig } from '../../src/config/index.ts';
import { ShardLayout } from '../../src/parallel/sharding/shardLayout.ts';
import { planRowBlocks, splitLayout, type RowSplittable } from '../../src/parallel/sharding/rowBlocks.ts';
import { SUBSET } from '../cli/helpers.ts';
import { freshDir, tensorsOf } from '../runtime/resumeHelpers.ts';
import { assertClose } from '../util/close.ts';

// SGD with momentum: the weights move linearly with the gradient, so its rounding stays rounding
// (Adam's normalised step turns a last-bit difference in a near-zero gradient into one of lr)
const base = {
  ...loadConfig('examples/mnist-small.yaml'),
  optimizer: parseConfig({
    model: { input: [1], layers: [{ dense: { units: 2 } }] },
    loss: 'softmaxCrossEntropy',
    optimizer: { sgd: { lr: 0.05, momentum: 0.9 } },
  }).optimizer,
};

function variant(devices: number, strategy: object, train: Partial<RunConfig['train']> = {}): RunConfig {
  return {
    ...base,
    data: { ...base.data, dir: SUBSET, batchSize: 8, trainLimit: 64, testLimit: 16 } as RunConfig['data'],
    train: {
      ...base.train,
      epochs: 1,
      devices,
      backend: 'js',
      evalEvery: 0,
      ...train,
      strategy: { type: 'hybrid', bucketBytes: 4, ...strategy } as RunConfig['train']['strategy'],
    },
  };
}

// 64 KiB blocks: 128 of the dense layer's 1600 rows of 128 floats each, 13 blocks
const BLOCKS = { shard: 3, rowBlockBytes: 65536 };

test('mnist-small: hybrid shard 3 with rowBlockBytes follows unsharded hybrid on 2 and 4 device threads', {
  timeout: 300_000,
}, async () => {
  for (const devices of [2, 4]) {
    // the second: micro-batches, clipping, and an evaluation after the first epoch (the whole
    // model gathered, the blocks let go, then taken up again)
    for (const extra of [{}, { microBatches: 2, clipGradNorm: 0.5, epochs: 2, evalEvery: 1 }]) {
      const a = await train(variant(devices, {}, extra), { out: freshDir(), log: () => {} });
      const b = await train(variant(devices, BLOCKS, extra), { out: freshDir(), log: () => {} });
      assert.ok(a.checkpoint && b.checkpoint);
      const want = tensorsOf(a.checkpoint);
      for (const [name, got] of tensorsOf(b.checkpoint))
        assertClose(got, want.get(name)!, {
          rtol: 1e-5,
          atol: 1e-7,
          what: `${devices} devices ${JSON.stringify(extra)} ${name}`,
        });
    }
  }
});

test('deepspeech-small: its dense layers on frames, the first without an input gradient, in row blocks on 2 device threads', {
  timeout: 300_000,
}, async () => {
  const speech = loadConfig('examples/deepspeech-small.yaml');
  const config = (strategy: object): RunConfig => ({
    ...speech,
    optimizer: base.optimizer,
    data: { ...speech.data, trainLimit: 32 } as RunConfig['data'],
    train: {
      ...speech.train,
      epochs: 1,
      devices: 2,
      backend: 'wasm',
      evalEvery: 0,
      strategy: { type: 'hybrid', bucketBytes: 4, ...strategy } as RunConfig['train']['strategy'],
    },
  });
  const a = await train(config({}), { out: freshDir(), log: () => {} });
  // 16 KiB: 42 of the first layer's 286 rows of 96 floats a block
  const b = await train(config({ shard: 3, rowBlockBytes: 16384 }), { out: freshDir(), log: () => {} });
  assert.ok(a.checkpoint && b.checkpoint);
  const want = tensorsOf(a.checkpoint);
  for (const [name, got] of tensorsOf(b.checkpoint))
    assertClose(got, want.get(name)!, { rtol: 1e-5, atol: 1e-7, what: name });
});

test('a frozen dense layer in row blocks stays as it started (initFrom.freeze), the others train as unsharded', {
  timeout: 120_000,
}, async () => {
  const start = await train(variant(2, {}), { out: freshDir(), log: () => {} });
  assert.ok(start.checkpoint);
  const initFrom = { path: start.checkpoint, reinit: [], freeze: ['layers.5'] };
  const a = await train(variant(2, {}, { initFrom }), { out: freshDir(), log: () => {} });
  const b = await train(variant(2, BLOCKS, { initFrom }), { out: freshDir(), log: () => {} });
  assert.ok(a.checkpoint && b.checkpoint);
  const from = tensorsOf(start.checkpoint),
    want = tensorsOf(a.checkpoint);
  for (const [name, got] of tensorsOf(b.checkpoint)) {
    if (name.startsWith('layers.5.')) assert.deepEqual(got, from.get(name), `${name} frozen`);
    assertClose(got, want.get(name)!, { rtol: 1e-5, atol: 1e-7, what: name });
  }
});

test('the layout: the dense layer cut into blocks of at most rowBlockBytes, the bias with the last, the rest untouched', () => {
  // a model of three layers: 10 floats, a dense kernel of 7 rows × 4 then its bias of 4 (after 2 floats of padding), 6 floats
  const model: RowSplittable = {
    layers: [0, 1, 2],
    layerParamRange: (i) =>
      [
        { start: 0, end: 10 },
        { start: 10, end: 44 },
        { start: 44, end: 50 },
      ][i]!,
    rowSplit: (i) =>
      i === 1 ? { kernel: { start: 10, end: 38 }, rows: 7, rowFloats: 4, bias: { start: 40, end: 44 } } : null,
  };
  const plans = planRowBlocks(model, 12);
  assert.equal(plans.length, 1);
  assert.deepEqual(
    plans[0]!.blocks.map((b) => [b.piece.start, b.piece.end, ...b.rows, b.bias?.start ?? -1]),
    [
      [10, 22, 0, 3, -1],
      [22, 34, 3, 6, -1],
      [34, 44, 6, 7, 40],
    ],
  );
  assert.deepEqual(planRowBlocks(model, 34), [], 'a layer within the bound stays whole');
  // one bucket over everything: cut around the layer
  const layout = splitLayout(new ShardLayout(50, [{ start: 0, end: 50 }], 2, 0), plans);
  assert.deepEqual(
    layout.pieces.map((p) => [p.start, p.end]),
    [
      [0, 10],
      [10, 22],
      [22, 34],
      [34, 44],
      [44, 50],
    ],
  );
});

test('rowBlockBytes is stage 3: without shard 3 the config is refused, naming the field', () => {
  const raw = (strategy: object) => ({
    model: { input: [4], layers: [{ dense: { units: 2 } }] },
    loss: 'softmaxCrossEntropy',
    optimizer: { adam: { lr: 0.001 } },
    train: { strategy: { hybrid: strategy } },
  });
  assert.throws(() => parseConfig(raw({ shard: 2, rowBlockBytes: 4096 })), /rowBlockBytes.*stage 3/s);
  assert.equal(
    (parseConfig(raw({ shard: 3, rowBlockBytes: 4096 })).train.strategy as { rowBlockBytes?: number }).rowBlockBytes,
    4096,
  );
});
