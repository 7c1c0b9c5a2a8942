/**
 * `train.pipeline`: the model's layers split into consecutive stages on consecutive devices, the
 * step's micro-batches (train.microBatches) streamed through them (parallel/pipeline/). What a
 * pipeline asks of the rest of the config is checked here too (pipelineIssues), with the model.
 */
import { z } from 'zod';
import type { RunConfig } from '../runConfig.ts';
import { field, isInt, oneOf, posInt, strict } from './fields.ts';
import { PIPELINE_SCHEDULES } from '../../parallel/pipeline/schedule.ts';
import { checkBoundaries } from '../../parallel/pipeline/partition.ts';
import { modelParallelLayers } from '../../parallel/modelParallel/plan.ts';

export const pipelineField = () =>
  strict(
    {
      stages: field<number>((v) => isInt(v) && v >= 2, 'expected an integer ≥ 2 (the devices one pipeline spans)'),
      schedule: oneOf(PIPELINE_SCHEDULES).default('1f1b'),
      boundaries: z.array(posInt()).optional(),
    },
    'option',
    undefined,
    '`{ stages: 2, schedule: 1f1b }`',
  ).optional();

/** One problem with a pipeline in `config` (the path under train, and the message). */
export interface PipelineIssue {
  path: ['train', string, ...string[]];
  /** names the value itself */
  message: string;
}

/**
 * What a pipeline over `devices` devices asks of the config (none without train.pipeline).
 * `perProcess`: `devices` is train.devices, one process's share of the job: one device per process
 * may still make a whole pipeline across processes, which the run checks with the job's devices.
 */
export function pipelineIssues(
  config: Pick<RunConfig, 'model' | 'train'>,
  devices: number,
  perProcess = false,
): PipelineIssue[] {
  const { train, model } = config;
  const p = train.pipeline;
  if (!p) return [];
  const issues: PipelineIssue[] = [];
  const at = (...path: string[]): PipelineIssue['path'] => ['train', ...path] as PipelineIssue['path'];
  if (devices % p.stages !== 0 && !(perProcess && devices === 1))
    issues.push({
      path: at('devices'),
      message: perProcess
        ? `train.pipeline has ${p.stages} stages, so train.devices must be 1 (one device per process, in a job of several processes) or a multiple of ${p.stages} (stages × pipelines), got ${devices}`
        : `train.pipeline has ${p.stages} stages, so the job's devices (processes × train.devices) must be a multiple of ${p.stages} (stages × pipelines), got ${devices}`,
    });
  if (p.stages > model.layers.length)
    issues.push({
      path: at('pipeline', 'stages'),
      message: `${p.stages} stages for a model of ${model.layers.length} layers; every stage needs at least one layer, so use at most ${model.layers.length}`,
    });
  else if (p.boundaries) {
    try {
      checkBoundaries(p.boundaries, model.layers.length, p.stages);
    } catch (e) {
      issues.push({ path: at('pipeline', 'boundaries'), message: (e as Error).message.replace(/^[\w.]+: /, '') });
    }
  }
  if (train.strategy.type !== 'hybrid')
    issues.push({
      path: at('strategy'),
      message: `a pipeline's stages reduce their gradients over the same stage of the other pipelines, which is hybrid's update; use strategy: hybrid (got ${train.strategy.type})`,
    });
  else if ((train.strategy.shard ?? 0) > 0)
    issues.push({
      path: at('strategy'),
      message:
        "hybrid.shard shards a whole replica's optimizer; a pipeline stage holds part of the model already; use shard: 0",
    });
  if (modelParallelLayers(model).length > 0)
    issues.push({
      path: at('pipeline'),
      message:
        "a pipeline splits the model by layers; layers marked 'parallel: model' split it within layers too, which is not supported together; remove one of them",
    });
  if (train.syncBatchNorm)
    issues.push({
      path: at('syncBatchNorm'),
      message:
        "a pipeline stage's BatchNorm cannot synchronise its statistics across devices; use syncBatchNorm: false",
    });
  if (train.backend === 'webgpu')
    issues.push({
      path: at('backend'),
      message: 'a pipeline runs on CPU backends; use backend: auto, wasm, native or onednn',
    });
  return issues;
}
