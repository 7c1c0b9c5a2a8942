import { GlobalBatchSampler } from '../data/sampler.ts';
import { Batcher } from '../data/batcher.ts';
import type { Dataset } from '../data/dataset.ts';
import { learningRateAt } from '../optim/schedule.ts';
import type { Strategy, ReplicaView } from '../parallel/strategy.ts';
import type { Replica } from './replica.ts';
import type { RunConfig } from './runConfig.ts';
import type { EventSink } from './events.ts';

export interface LoopOptions {
  replica: Replica;
  strategy: Strategy;
  config: RunConfig;
  train: Dataset;
  rank: number;
  worldSize: number;
  emit: EventSink;
  /** called after each epoch (evaluation, checkpoints); awaited before the next epoch */
  onEpochEnd?: (epoch: number, step: number) => Promise<void> | void;
}

/** Samples one step processes over all devices. */
export function globalBatchSize(config: RunConfig): number {
  const { batchSize, batchSizeScope } = config.data;
  return batchSizeScope === 'global' ? batchSize : batchSize * config.train.devices;
}

/** The base learning rate after linear scaling by the device count, when asked for. */
export function baseLearningRate(config: RunConfig): number {
  return config.optimizer.lr * (config.train.lrScaling === 'linear' ? config.train.devices : 1);
}

export function viewOf(replica: Replica): ReplicaView {
  return {
    params: replica.model.params,
    grads: replica.model.grads,
    state: replica.model.state,
    localStep: (lr) => replica.optimizer.step(replica.model.params, replica.model.grads, lr),
  };
}

/**
 * The training loop one device runs, identical for every strategy: gather this rank's slice of the
 * global batch, forward/backward, let the strategy apply the update, let it synchronise.
 */
export async function runTrainLoop(o: LoopOptions): Promise<void> {
  const { replica, strategy, config, rank, worldSize, emit } = o;
  const globalBatch = globalBatchSize(config);
  const sampler = new GlobalBatchSampler({
    count: o.train.count, batchSize: globalBatch, worldSize, rank,
    seed: config.train.seed, shuffle: config.data.shuffle, dropLast: false,
  });
  const stepsPerEpoch = sampler.stepsPerEpoch();
  const totalSteps = stepsPerEpoch * config.train.epochs;
  const baseLr = baseLearningRate(config);
  const batcher = new Batcher(o.train);
  const view = viewOf(replica);
  await strategy.onStart?.(view);
  let step = 0;
  for (let epoch = 0; epoch < config.train.epochs; epoch++) {
    for (const batch of sampler.epoch(epoch)) {
      const t0 = performance.now();
      const { images, labels } = batcher.gather(batch.indices);
      replica.model.zeroGrads();
      // Scale by the GLOBAL batch: summing G ranks' gradients then gives the mean over all samples.
      const r = replica.computeGradients(images, labels,
        { training: true, seed: config.train.seed, step, sampleOffset: batch.globalOffset }, worldSize / batch.globalBatchSize);
      const lr = learningRateAt(step, baseLr, config.schedule, totalSteps);
      const info = { step, epoch, lr, samples: r.samples };
      const t1 = performance.now();
      if (strategy.applyUpdate) await strategy.applyUpdate(view, info);
      else view.localStep(lr);
      await strategy.afterStep?.(view, info);
      const t2 = performance.now();
      emit({
        type: 'step', rank, epoch, step, stepInEpoch: batch.step, stepsPerEpoch,
        loss: r.samples ? r.lossSum / r.samples : 0, accuracy: r.samples ? r.correct / r.samples : 0,
        lr, samples: r.samples, computeMs: t1 - t0, commMs: t2 - t1,
      });
      step++;
    }
    await o.onEpochEnd?.(epoch, step);
  }
  await strategy.onFinish?.(view);
}
