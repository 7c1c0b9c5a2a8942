/**
 * What a job on several devices asks of the config: the strategy and options its devices must
 * share. Written once, as a function of the device count, and applied twice: by the schema with
 * train.devices (a job runs a multiple of them, so what fails there fails every job of that
 * config, and the error names the file), and by the run with the job's devices, processes ×
 * train.devices (runtime/run/inputChecks.ts), which a config of one device per process needs.
 */
import type { RunConfig } from '../runConfig.ts';
import { runsModelParallel, stepsInLockstep, syncBatchNormStrategyMessage } from '../../parallel/strategies/index.ts';
import { modelParallelLayers, modelParallelStrategyMessage } from '../../parallel/modelParallel/plan.ts';

/** One problem: the field it is about, and the message (`noGot`: the message names the value itself). */
export interface DeviceIssue {
  path: ['train', string];
  message: string;
  noGot?: true;
}

/** The problems of `config` on a job of `devices` devices (none on one device). */
export function multiDeviceIssues(config: Pick<RunConfig, 'model' | 'train'>, devices: number): DeviceIssue[] {
  if (devices <= 1) return [];
  const { train } = config;
  const issues: DeviceIssue[] = [];
  const split = modelParallelLayers(config.model).length > 0;
  if (split && !runsModelParallel(train.strategy)) {
    issues.push({
      path: ['train', 'strategy'],
      message: modelParallelStrategyMessage(config.model, train.strategy.type),
      noGot: true,
    });
  }
  if (split && train.microBatches > 1) {
    issues.push({
      path: ['train', 'microBatches'],
      message: `micro-batching is not supported together with model-parallel layers ('parallel: model') on several devices; use microBatches: 1 or make the layers data-parallel`,
    });
  }
  // synchronised statistics need every device in the same forward pass at the same time
  if (train.syncBatchNorm && !stepsInLockstep(train.strategy)) {
    issues.push({ path: ['train', 'syncBatchNorm'], message: syncBatchNormStrategyMessage(train.strategy) });
  }
  return issues;
}
