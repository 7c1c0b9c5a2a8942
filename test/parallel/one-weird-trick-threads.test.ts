import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { train } from '../../src/runtime/run/train.ts';
import { loadConfig } from '../../src/config/index.ts';
import type { TrainEvent } from '../../src/runtime/events/events.ts';
import type { RunConfig } from '../../src/config/runConfig.ts';
import { tinyConfig, trainAndReadWeights, SUBSET } from './helpers.ts';
import { assertClose } from '../util/close.ts';

// The trick on real worker threads (shared-memory collectives, wasm kernels, shards sent to rank 0
// for the checkpoint) against one device on the same global batch. Same tolerance argument as
// one-weird-trick.test.ts: only float32 summation order differs.
const TOL = { rtol: 1e-4, atol: 1e-5 };

test('trick on 2 worker threads equals one device on the global batch (uneven last batch, dropout on)', async () => {
  const layers = [
    { conv2d: { filters: 4, kernelSize: 3, strides: 2, activation: 'relu' } },
    { flatten: {} },
    { dense: { units: 13, activation: 'relu', parallel: 'model' } },
    { dropout: { rate: 0.3, masks: 'per-sample' } },
    { dense: { units: 10, parallel: 'model' } },
  ];
  const data = { trainLimit: 91 };
  const single = await trainAndReadWeights(tinyConfig({ layers, data: { ...data, batchSize: 16 } }));
  const trick = await trainAndReadWeights(tinyConfig({ layers, data, train: { devices: 2, strategy: 'hybrid' } }));
  assertClose(trick, single, { ...TOL, what: 'trick G=2 weights' });
});

/** alexnet-small cut to a few steps; `modelParallel: false` drops every `parallel: model`. */
function alexnet(modelParallel: boolean): RunConfig {
  const config = loadConfig(new URL('../../examples/alexnet-small.yaml', import.meta.url).pathname);
  const layers = config.model.layers.map((l) =>
    l.type === 'dense' && !modelParallel ? { ...l, parallel: 'data' as const } : l,
  );
  return {
    ...config,
    model: { ...config.model, layers },
    data: { ...config.data, dir: SUBSET, trainLimit: 128, testLimit: 50 },
    train: { ...config.train, devices: 2, epochs: 1, evalEvery: 0 },
  };
}

/** Median bytes a device communicated per step. */
async function bytesPerStep(config: RunConfig): Promise<number> {
  const bytes: number[] = [];
  await train(config, {
    out: join(mkdtempSync(join(tmpdir(), 'paratrain-trick-bytes-')), 'run'),
    onEvent: (e: TrainEvent) => {
      if (e.type === 'step') bytes.push(e.bytes);
    },
  });
  bytes.sort((a, b) => a - b);
  return bytes[bytes.length >> 1]!;
}

test('alexnet-small with the trick moves activations, not FC weights: far fewer bytes per step than data parallelism', async () => {
  const trick = await bytesPerStep(alexnet(true));
  const dataParallel = await bytesPerStep(alexnet(false));
  assert.ok(trick > 0, 'the activation exchange is counted');
  console.log(`bytes per step: trick ${trick}, data parallel ${dataParallel}`);
  // FC weights are 97% of the 1.7M parameters; with 64 samples per step the activations are far smaller
  assert.ok(
    trick * 3 < dataParallel,
    `trick ${trick} B/step should be well under data-parallel ${dataParallel} B/step`,
  );
});
