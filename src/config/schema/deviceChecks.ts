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
import { pipelineIssues } from './pipeline.ts';

/** One problem: the field it is about, and the message (`noGot`: the message names the value itself). */
export interface DeviceIssue {
  path: ['train', string, ...string[]];
  message: string;
  noGot?: true;
}

/**
 * The problems of `config` on a job of `devices` devices (none on one device). `perProcess`: the
 * schema's call, with train.devices, one process's share of a job of any number of processes.
 */
export function multiDeviceIssues(
  config: Pick<RunConfig, 'model' | 'train'>,
  devices: number,
  perProcess = false,
): DeviceIssue[] {
  // a pipeline spans several devices: on one, that is its first problem
  const issues: DeviceIssue[] = pipelineIssues(config, devices, perProcess).map((i) => ({ ...i, noGot: true }));
  if (devices <= 1 || config.train.pipeline) return issues;
  const { train } = config;
  const split = modelParallelLayers(config.model).length > 0;
  if (split && !runsModelParallel(train.strategy)) {
    issues.push({
      path: ['train', 'strategy'],
      message: modelParallelStrategyMessage(config.model, train.strategy.type),
      noGot: true,
    });
  }
  const tp = train.tensorParallel;
  if (tp !== undefined && !split)
    issues.push({
      path: ['train', 'tensorParallel'],
      message: `train.tensorParallel sizes the groups of devices that split the layers marked 'parallel: model', and no layer is marked; mark them (transformerBlock: { parallel: model }, or model.parallel: model) or leave tensorParallel out`,
      noGot: true,
    });
  // a group larger than one process's devices spans processes: the run checks it against the job's
  else if (tp !== undefined && (tp < 2 || (tp > devices ? !perProcess || tp % devices !== 0 : devices % tp !== 0))) {
    const fits = [...Array(devices).keys()].map((d) => d + 1).filter((d) => d >= 2 && devices % d === 0);
    issues.push({
      path: ['train', 'tensorParallel'],
      message: `a tensor-parallel group of ${tp} devices must have at least 2 and divide the job's ${devices}; use ${fits.join(', ')}`,
      noGot: true,
    });
  }
  if (split && train.microBatches > 1) {
    issues.push({
      path: ['train', 'microBatches'],
      message: `micro-batching is not supported together with model-parallel layers ('parallel: model') on several devices; use microBatches: 1 or make the layers data-parallel`,
    });
  }
  // ZeRO sharding splits the flat buffer of a whole replica over the devices, on the host
  const shard = train.strategy.type === 'hybrid' ? (train.strategy.shard ?? 0) : 0;
  if (shard > 0 && (split || train.backend === 'webgpu')) {
    issues.push({
      path: ['train', 'strategy'],
      message: split
        ? `hybrid.shard ${shard} shards the optimizer of a whole replica; 'parallel: model' layers split the model instead; use shard: 0 or make the layers data-parallel`
        : `hybrid.shard ${shard} needs CPU devices (the sharded optimizer steps on the host); use shard: 0 with backend webgpu`,
    });
  }
  // synchronised statistics need every device in the same forward pass at the same time
  if (train.syncBatchNorm && !stepsInLockstep(train.strategy)) {
    issues.push({ path: ['train', 'syncBatchNorm'], message: syncBatchNormStrategyMessage(train.strategy) });
  }
  return issues;
}
