/**
 * ZeRO stage 3 (and stage 2, whose gradient it shares, on the tied transformer) on the shipped examples, trained by `train()` on 2 and 4 device threads (shared
 * memory): mnist-small on the Fashion-MNIST subset, deepspeech-small (a bidirectional LSTM, CTC)
 * on the speech corpus and shakespeare-char (a transformer whose output projection is tied to its
 * embedding) on its text, a layer per unit (bucketBytes 4), clipped. Each equals unsharded hybrid
 * with the same buckets bit for bit: the threads reduce in rank order, so each unit's
 * reduce-scatter sums what hybrid's all-reduce sums.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { train } from '../../src/runtime/run/train.ts';
import { loadConfig } from '../../src/config/load.ts';
import type { RunConfig } from '../../src/config/runConfig.ts';
import { SUBSET } from '../cli/helpers.ts';
import { assertSameTensors, freshDir, tensorsOf } from '../runtime/resumeHelpers.ts';

function variant(
  base: RunConfig,
  devices: number,
  shard: number,
  data: Partial<RunConfig['data']>,
  backend: 'js' | 'wasm',
): RunConfig {
  return {
    ...base,
    data: { ...base.data, ...data } as RunConfig['data'],
    train: {
      ...base.train,
      epochs: 1,
      devices,
      backend,
      evalEvery: 0,
      clipGradNorm: 5,
      strategy: { type: 'hybrid', bucketBytes: 4, ...(shard ? { shard: shard as 2 | 3 } : {}) },
    },
  };
}

// clipped: the norm from the devices' parts is the whole gradient's to the bit (optim/treeSquares.ts)
const WORKLOADS: [string, RunConfig, Partial<RunConfig['data']>, 'js' | 'wasm'][] = [
  [
    'mnist-small',
    loadConfig('examples/mnist-small.yaml'),
    { dir: SUBSET, batchSize: 8, trainLimit: 64, testLimit: 16 } as Partial<RunConfig['data']>,
    'wasm',
  ],
  [
    'deepspeech-small',
    loadConfig('examples/deepspeech-small.yaml'),
    { trainLimit: 64 } as Partial<RunConfig['data']>,
    'wasm',
  ],
  // a tied output projection: the embedding's unit stays gathered from its forward to the projection's
  [
    'shakespeare-char',
    loadConfig('examples/shakespeare-char.yaml'),
    { trainLimit: 24, validation: 0.002 } as Partial<RunConfig['data']>,
    'wasm',
  ],
];

for (const [name, config, data, backend] of WORKLOADS) {
  // stage 2 too where a unit's gradient is started by another layer (the tied projection's)
  const stages = name === 'shakespeare-char' ? [3, 2] : [3];
  test(`${name}: hybrid shard ${stages.join(' and ')} equal${stages.length > 1 ? '' : 's'} unsharded hybrid bit for bit on 2 and 4 device threads`, {
    timeout: 300_000,
  }, async () => {
    for (const devices of [2, 4]) {
      const a = await train(variant(config, devices, 0, data, backend), { out: freshDir(), log: () => {} });
      assert.ok(a.checkpoint);
      for (const shard of stages) {
        const b = await train(variant(config, devices, shard, data, backend), { out: freshDir(), log: () => {} });
        assert.ok(b.checkpoint);
        assertSameTensors(tensorsOf(b.checkpoint), tensorsOf(a.checkpoint));
      }
    }
  });
}
