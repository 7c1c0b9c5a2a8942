/** Shared by the model-parallel section tests: train in this thread, compare G devices with one device on G·b. */
import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { jsBackend } from '../../src/kernels/js/index.ts';
import { runDevice } from '../../src/runtime/job/deviceRun.ts';
import { loadData } from '../../src/runtime/run/train.ts';
import { readCheckpoint } from '../../src/runtime/checkpoint/checkpoint.ts';
import { hybridStrategy } from '../../src/parallel/strategies/hybrid.ts';
import { localStrategy } from '../../src/parallel/strategy.ts';
import type { RunConfig } from '../../src/config/runConfig.ts';
import { tinyConfig } from './helpers.ts';
import { localGroup } from './localGroup.ts';
import { assertClose } from '../util/close.ts';

/**
 * The runs differ only in float32 summation order, so after ~24 steps of SGD with momentum or Adam the
 * weights and optimizer state agree to ~1e-6 relative; we allow rtol 1e-4 with atol 1e-5 (Adam
 * amplifies rounding slightly). A missing or doubled gradient scale is off by a factor G, far outside.
 */
export const TOL = { rtol: 1e-4, atol: 1e-5 };

/** Trains with the devices in this thread (in-process collectives, js backend); rank 0's checkpoint, gathered. */
export async function trainInProcess(config: RunConfig, bucketBytes = 1 << 30): Promise<Map<string, Float32Array>> {
  const data = await loadData(config);
  const checkpoint = join(mkdtempSync(join(tmpdir(), 'paratrain-trick-')), 'model.safetensors');
  const G = config.train.devices;
  const base = {
    config,
    worldSize: G,
    backend: jsBackend,
    train: data.train,
    test: null,
    emit: () => {},
    shared: false,
  };
  if (G === 1) await runDevice({ ...base, rank: 0, strategy: localStrategy, checkpointPath: checkpoint });
  else {
    await Promise.all(
      localGroup(G).map((comm) =>
        runDevice({
          ...base,
          rank: comm.rank,
          comm,
          strategy: hybridStrategy(comm, bucketBytes),
          checkpointPath: comm.rank === 0 ? checkpoint : null,
        }),
      ),
    );
  }
  return new Map([...readCheckpoint(checkpoint).tensors].map(([name, t]) => [name, t.data]));
}

/**
 * The split on `devices` devices against one device with the whole batch (every tensor of the
 * checkpoint, optimizer state included); `watch` must move in training, so the comparison is not vacuous.
 */
export async function compareWithOneDevice(
  layers: unknown[],
  devices: number,
  optimizer: unknown,
  watch: string,
  what: string,
  o: { trainLimit?: number; bucketBytes?: number } = {},
): Promise<void> {
  const common = { layers, optimizer, train: { epochs: 2, backend: 'js' } };
  const data = { trainLimit: o.trainLimit ?? 91 }; // 91: the last global batch is short and splits unevenly over the devices
  const single = await trainInProcess(
    tinyConfig({ ...common, data: { ...data, batchSize: 8 * devices } }),
    o.bucketBytes,
  );
  const split = await trainInProcess(
    tinyConfig({ ...common, data, train: { ...common.train, devices, strategy: 'hybrid' } }),
    o.bucketBytes,
  );
  assert.deepStrictEqual([...split.keys()].sort(), [...single.keys()].sort(), `${what}: the same tensors`);
  for (const [name, d] of single) assertClose(split.get(name)!, d, { ...TOL, what: `${what} ${name}` });
  const fresh = await trainInProcess(
    tinyConfig({
      ...common,
      data: { ...data, batchSize: 8 * devices, trainLimit: 1 },
      train: { ...common.train, epochs: 1 },
    }),
    o.bucketBytes,
  );
  assert.ok(
    single.get(watch)!.some((v, i) => Math.abs(v - fresh.get(watch)![i]!) > 1e-3),
    `${what}: ${watch} changed in training`,
  );
}
