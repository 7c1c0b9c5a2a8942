import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { jsBackend } from '../../src/kernels/js/index.ts';
import { runDevice } from '../../src/runtime/job/deviceRun.ts';
import { readCheckpoint } from '../../src/runtime/checkpoint/checkpoint.ts';
import { hybridStrategy } from '../../src/parallel/strategies/hybrid.ts';
import { localStrategy } from '../../src/parallel/strategy.ts';
import type { FaultPlan } from '../../src/runtime/faults/faultPlan.ts';
import type { Dataset } from '../../src/data/dataset.ts';
import type { RunConfig } from '../../src/config/runConfig.ts';
import type { TrainEvent } from '../../src/runtime/events/events.ts';
import { localGroup } from './localGroup.ts';
import { randomArray } from '../util/close.ts';

/**
 * Training on in-memory datasets with every device in THIS thread (in-process collectives, js
 * backend, hybrid with small gradient buckets), for equivalence tests of losses and models that
 * the shipped Fashion-MNIST subset cannot exercise (regression and multi-label targets).
 */

/** A synthetic dataset: `count` samples of `shape`, with targets from a fixed function of the inputs. */
export function syntheticDataset(
  task: 'classification' | 'regression' | 'multiLabel',
  count: number,
  shape: number[],
  outputs: number,
  seed = 1,
): Dataset {
  const per = shape.reduce((a, b) => a * b, 1);
  const images = randomArray(count * per, seed);
  const mix = randomArray(per * outputs, seed + 1);
  // score k of sample i: a fixed random projection of its inputs, bent by tanh
  const score = (i: number, k: number) => {
    let s = 0;
    for (let j = 0; j < per; j++) s += images[i * per + j]! * mix[j * outputs + k]!;
    return Math.tanh(s);
  };
  const labels = new Int32Array(count);
  const ds: Dataset = {
    name: `synthetic-${task}`,
    images,
    labels,
    count,
    sampleShape: shape,
    classes: task === 'classification' ? outputs : 0,
    task,
  };
  if (task === 'classification') {
    for (let i = 0; i < count; i++) {
      let best = 0;
      for (let k = 1; k < outputs; k++) if (score(i, k) > score(i, best)) best = k;
      labels[i] = best;
    }
    return ds;
  }
  const targets = new Float32Array(count * outputs);
  for (let i = 0; i < count; i++) {
    for (let k = 0; k < outputs; k++)
      targets[i * outputs + k] = task === 'regression' ? 2 * score(i, k) + 0.5 : score(i, k) > 0 ? 1 : 0;
  }
  return { ...ds, targets, targetSize: outputs };
}

export interface InMemoryRun {
  /** rank 0's final checkpoint: every tensor by name */
  tensors: Map<string, Float32Array>;
  events: TrainEvent[];
}

/**
 * Trains `config` on its train.devices devices in this thread (hybrid, gradient buckets of
 * `bucketBytes`), evaluating on `test` when given. localGroup runs one collective at a time, so a
 * model whose layers communicate in backward (synchronised BatchNorm) needs one bucket (1 << 30).
 */
export async function trainInMemory(
  config: RunConfig,
  train: Dataset,
  test: Dataset | null = null,
  o: { faults?: FaultPlan; bucketBytes?: number } = {},
): Promise<InMemoryRun> {
  const checkpoint = join(mkdtempSync(join(tmpdir(), 'paratrain-mem-')), 'model.safetensors');
  const G = config.train.devices;
  const events: TrainEvent[] = [];
  const base = {
    config,
    worldSize: G,
    backend: jsBackend,
    train,
    test,
    emit: (e: TrainEvent) => events.push(e),
    shared: false,
    faults: o.faults,
  };
  if (G === 1) await runDevice({ ...base, rank: 0, strategy: localStrategy, checkpointPath: checkpoint });
  else {
    await Promise.all(
      localGroup(G).map((comm) =>
        runDevice({
          ...base,
          rank: comm.rank,
          comm,
          strategy: hybridStrategy(comm, o.bucketBytes ?? 256),
          checkpointPath: comm.rank === 0 ? checkpoint : null,
        }),
      ),
    );
  }
  return { tensors: new Map([...readCheckpoint(checkpoint).tensors].map(([name, t]) => [name, t.data])), events };
}
