import { parseConfig } from '../../src/config/index.ts';
import type { RunConfig } from '../../src/config/runConfig.ts';
import { ownedSlice, type Communicator } from '../../src/comm/communicator.ts';
import { jsBackend } from '../../src/kernels/js/index.ts';
import { Replica } from '../../src/runtime/device/replica.ts';
import { createStrategy } from '../../src/parallel/strategies/index.ts';
import type { ReplicaView, Strategy, StrategyStepStats } from '../../src/parallel/strategy.ts';
import { localGroup } from './localGroup.ts';
import { randomArray } from '../util/close.ts';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { writeFileSync } from 'node:fs';
import { SUBSET } from '../cli/helpers.ts';
import { restoreDeviceState, writeDeviceState } from '../../src/runtime/device/deviceState.ts';
import type { SetState } from '../../src/runtime/checkpoint/checkpointSet.ts';

/**
 * In-process data-parallel training for the sharding tests: real replicas (js backend) of a tiny
 * model, one strategy per device over localGroup's communicators, driven step by step as the
 * training loop drives them (zero, forward/backward reporting gradient offsets, applyUpdate).
 */

export const GLOBAL_BATCH = 8;

export const MLP = { input: [6], layers: [{ dense: { units: 12, activation: 'tanh' } }, { dense: { units: 4 } }] };
export const CONV = {
  input: [6, 6, 1],
  layers: [
    { conv2d: { filters: 3, kernelSize: 3, activation: 'relu' } },
    { flatten: {} },
    { dense: { units: 8, activation: 'relu' } },
    { dense: { units: 4 } },
  ],
};
export const ADAM = { adam: { lr: 0.01 } };
export const MOMENTUM = { sgd: { lr: 0.05, momentum: 0.9 } };

export function shardConfig(
  model: unknown,
  optimizer: unknown,
  devices: number,
  shard: number,
  train: Record<string, unknown> = {},
): RunConfig {
  // 64-byte buckets: several per model, so stage 2's layout is hybrid's buckets, not one piece
  return parseConfig(
    { model, optimizer, train: { seed: 5, devices, strategy: { hybrid: { shard, bucketBytes: 64 } }, ...train } },
    'sharding test',
  );
}

/** A communicator whose reduce-scatter leaves NaN outside the owned slice: a device that reads more fails loudly. */
export function scatterOnly(comm: Communicator): Communicator {
  return {
    ...comm,
    async reduceScatter(buf, op) {
      const own = await comm.reduceScatter(buf, op);
      buf.fill(NaN, 0, own.start);
      buf.fill(NaN, own.end);
      return ownedSlice(buf.length, comm.size, comm.rank);
    },
  };
}

export interface Job {
  config: RunConfig;
  replicas: Replica[];
  views: ReplicaView[];
  strategies: Strategy[];
  step: number;
}

/** G replicas and their strategies, started (rank 0's weights everywhere). */
export async function startJob(config: RunConfig): Promise<Job> {
  const devices = config.train.devices;
  const comms = localGroup(devices).map(scatterOnly);
  const replicas = comms.map(() => new Replica(jsBackend, config));
  const views = replicas.map((r) => r.view());
  const strategies = comms.map((comm) => createStrategy(config.train.strategy, { comm, ps: null }));
  await Promise.all(strategies.map((s, r) => s.onStart?.(views[r]!)));
  return { config, replicas, views, strategies, step: 0 };
}

/** The global batch of a step: deterministic inputs and labels, the same on any device count. */
function globalBatch(config: RunConfig, step: number) {
  const per = config.model.input.reduce((a, b) => a * b, 1);
  const images = randomArray(GLOBAL_BATCH * per, 1000 + step);
  const labels = Int32Array.from({ length: GLOBAL_BATCH }, (_, i) => (i * 7 + step * 3) % 4);
  return { images, labels, per };
}

/**
 * One training step on every device; `nanOn`: that rank's inputs are NaN (its loss is non-finite);
 * `poisonOn`: that rank's gradient gets one NaN (at float 0, which backward adds to) and a finite loss.
 */
export async function step(
  job: Job,
  lr = 0.01,
  nanOn?: number,
  poisonOn?: number,
): Promise<(StrategyStepStats | undefined)[]> {
  const { config, replicas, views, strategies } = job;
  const devices = replicas.length;
  const { images, labels, per } = globalBatch(config, job.step);
  const stats = await Promise.all(
    replicas.map(async (replica, r) => {
      const { start, end } = ownedSlice(GLOBAL_BATCH, devices, r);
      const x = images.slice(start * per, end * per);
      if (nanOn === r) x.fill(NaN);
      const info = { step: job.step, epoch: 0, lr, samples: end - start, lossNonFinite: false };
      await strategies[r]!.beforeStep?.(views[r]!, info);
      replica.zeroGrads(poisonOn === r ? (g) => g.fill(NaN, 0, 1) : undefined);
      const ctx = { training: true, seed: 1, step: job.step, sampleOffset: start, rank: r, localOffset: 0 };
      const onReady = (offset: number) => strategies[r]!.onGradientsReady?.(views[r]!, offset);
      const result = await replica.computeGradientsAsync(
        x,
        labels.slice(start, end),
        ctx,
        devices / GLOBAL_BATCH,
        onReady,
        GLOBAL_BATCH,
      );
      info.lossNonFinite = !Number.isFinite(result.lossSum);
      return strategies[r]!.applyUpdate!(views[r]!, info);
    }),
  );
  job.step++;
  return stats;
}

/** Every device's whole weights (collective: ZeRO stage 3 gathers them). */
export async function wholeParams(job: Job): Promise<Float32Array[]> {
  await Promise.all(job.replicas.map((r, rank) => r.gather(rank, false)));
  return job.replicas.map((r) => r.model.params.slice());
}

/** Trains `steps` steps and returns every device's weights. */
export async function trainJob(config: RunConfig, steps: number): Promise<{ job: Job; params: Float32Array[] }> {
  const job = await startJob(config);
  for (let s = 0; s < steps; s++) await step(job);
  return { job, params: await wholeParams(job) };
}

/** Every device's file of a checkpoint set, as the loop writes it (the collective gather first: a sharded state whole). */
export async function checkpointJob(job: Job): Promise<string> {
  const dir = mkdtempSync(join(tmpdir(), 'paratrain-shard-'));
  await Promise.all(job.replicas.map((r, rank) => r.gather(rank, true)));
  for (const [rank, r] of job.replicas.entries()) writeDeviceState(dir, rank, r, job.strategies[rank]!, job.step);
  return dir;
}

/** A new job of `config` resumed from `dir` (written by `saved` devices at step `at`). */
export async function resumeJob(config: RunConfig, dir: string, saved: number, at: number): Promise<Job> {
  const job = await startJob(config);
  const point = { dir, state: { devices: saved, processes: 1 } as SetState };
  for (const [rank, r] of job.replicas.entries())
    restoreDeviceState(point, rank, job.replicas.length, r, job.strategies[rank]!);
  job.step = at;
  return job;
}

/**
 * The CLI sharding tests' config, written into `dir` as `name`: a small convnet with Adam and
 * clipping on the shipped subset, `hybrid` with `shard` (0: none) and 2 KiB buckets (several units).
 */
export function writeShardingConfig(dir: string, name: string, shard: number, epochs: number, evalEvery = 0): string {
  const path = join(dir, name);
  writeFileSync(
    path,
    `model:
  input: [28, 28, 1]
  layers:
    - conv2d: { filters: 4, kernelSize: 3, strides: 2, activation: relu }
    - flatten: {}
    - dense: { units: 16, activation: relu }
    - dense: { units: 10 }
optimizer: { adam: { lr: 0.002 } }
data: { dir: ${JSON.stringify(SUBSET)}, batchSize: 8, trainLimit: 48, testLimit: 20 }
train: { epochs: ${epochs}, seed: 5, evalEvery: ${evalEvery}, backend: js, clipGradNorm: 1, strategy: { hybrid: { shard: ${shard}, bucketBytes: 2048 } } }
`,
  );
  return path;
}
