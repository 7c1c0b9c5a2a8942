import type { Communicator } from '../comm/communicator.ts';
import type { Sequential } from '../nn/model.ts';
import { BatchNorm, type StatsReducer } from '../nn/batchNorm.ts';
import { allLayers } from '../nn/layer.ts';

/** Batch statistics summed over the ranks of `comm` (every rank's BatchNorm layers in the same order). */
export function commStatsReducer(comm: Communicator): StatsReducer {
  return { sum: (values) => comm.allreduce(values, 'sum') };
}

/**
 * train.syncBatchNorm: every BatchNorm layer of `model` normalises with the mean and variance of
 * the batch over all ranks of `comm` (and back-propagates through them), so G devices with batch b
 * equal one device's BatchNorm on G·b, running statistics included. Returns the number of layers.
 */
export function synchroniseBatchNorm(model: Sequential, comm: Communicator): number {
  const reducer = comm.size > 1 ? commStatsReducer(comm) : null;
  let count = 0;
  // nested ones too (inside residual blocks), in the same order on every replica
  for (const layer of allLayers(model.layers)) {
    if (layer instanceof BatchNorm) {
      layer.setReducer(reducer);
      count++;
    }
  }
  return count;
}
