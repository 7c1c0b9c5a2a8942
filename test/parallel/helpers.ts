import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseConfig } from '../../src/config/index.ts';
import { train, type TrainOptions } from '../../src/runtime/run/train.ts';
import { readCheckpoint } from '../../src/runtime/checkpoint/checkpoint.ts';
import type { RunConfig } from '../../src/config/runConfig.ts';

export const SUBSET = new URL('../../data/fashion-mnist-subset/', import.meta.url).pathname;

/** A small convnet with dropout on a slice of the shipped subset: fast enough for unit tests. */
export function tinyConfig(
  overrides: {
    optimizer?: unknown;
    train?: Record<string, unknown>;
    data?: Record<string, unknown>;
    layers?: unknown[];
  } = {},
): RunConfig {
  return parseConfig(
    {
      model: {
        input: [28, 28, 1],
        layers: overrides.layers ?? [
          { conv2d: { filters: 4, kernelSize: 3, strides: 2, activation: 'relu' } },
          { maxPool2d: { poolSize: 2 } },
          { flatten: {} },
          { dense: { units: 16, activation: 'relu' } },
          { dropout: { rate: 0.3, masks: 'per-sample' } },
          { dense: { units: 10 } },
        ],
      },
      optimizer: overrides.optimizer ?? { sgd: { lr: 0.05, momentum: 0.9 } },
      data: { dir: SUBSET, batchSize: 8, trainLimit: 96, testLimit: 100, ...overrides.data },
      train: { epochs: 1, seed: 3, evalEvery: 0, ...overrides.train },
    },
    'test config',
  );
}

/** Trains into a fresh temporary directory and returns the final weights (all tensors, name order). */
export async function trainAndReadWeights(config: RunConfig, options: TrainOptions = {}): Promise<Float32Array> {
  const out = join(mkdtempSync(join(tmpdir(), 'paratrain-test-')), 'run');
  const result = await train(config, { out, ...options });
  const { tensors } = readCheckpoint(result.checkpoint);
  const names = [...tensors.keys()].filter((n) => n.startsWith('layers.')).sort();
  const parts = names.map((n) => tensors.get(n)!.data);
  const all = new Float32Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) {
    all.set(p, at);
    at += p.length;
  }
  return all;
}
