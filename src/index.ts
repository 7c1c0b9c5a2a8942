/**
 * The paratrain library: define a config in code (`defineConfig`) or load one from YAML
 * (`loadConfig`), `train` it on one or many devices, and `loadModel` a checkpoint to `predict`.
 * The guide is docs/library.md; the reference docs/api/.
 *
 * @packageDocumentation
 */
import {
  applyOverrides,
  loadConfig,
  resolveConfig,
  OVERRIDE_KEYS,
  type ConfigInput,
  type ConfigOverrides,
  type RunConfig,
} from './config/index.ts';
import { train as trainRun, type TrainResult } from './runtime/run/train.ts';
import { checkTrainOptions, TRAIN_OPTION_KEYS, type TrainOptions } from './runtime/run/trainOptions.ts';

export { loadConfig, parseConfig, applyOverrides, defineConfig, configToYaml, ConfigError } from './config/index.ts';
export type { ConfigInput, ConfigOverrides, RunConfig, TrainSpec } from './config/index.ts';
export type { TrainOptions, StepSummary, EpochSummary, ProcessesOption } from './runtime/run/trainOptions.ts';
export type { TrainResult } from './runtime/run/train.ts';
export { RunFinishedError } from './runtime/run/runFinished.ts';
export type { TrainEvent, EventSink } from './runtime/events/events.ts';
export { loadModel, predict, LoadedModel, type LoadModelOptions } from './runtime/infer/loadModel.ts';
export type { Prediction, PredictInput, SampleInput } from './runtime/infer/predict.ts';
export type { DataInfo, Task } from './runtime/checkpoint/checkpointInfo.ts';
export { DATA_METADATA_KEY } from './data/metadata.ts';
export { FaultPlan, type FaultPlanData } from './runtime/faults/faultPlan.ts';
export { readMetrics } from './runtime/events/metrics.ts';
export { readCheckpoint, writeCheckpoint, type CheckpointTensor } from './runtime/checkpoint/checkpoint.ts';
export { getBackend, registeredBackends } from './kernels/index.ts';
export { rendezvousFromEnv, type RendezvousInfo } from './comm/rendezvous.ts';
export { memoryDataset, removeMemoryDataset, type MemoryArrays, type MemorySamples } from './data/memory.ts';
// speech: CTC loss, decoding and error rates (the training loop uses them through loss: ctc and data: { dataset: speech })
export { CtcLoss, ctcGradScale, ctcReducedLoss, ctcMinFrames } from './ctc/ctcLoss.ts';
export type { CtcLossOptions, CtcLossResult, CtcReduction, CtcTargets } from './ctc/ctcLoss.ts';
export { greedyDecode, greedyDecodeBatch, labelsToText } from './ctc/ctcDecode.ts';
export {
  prefixBeamSearch,
  beamSearchBatch,
  type BeamHypothesis,
  type BeamSearchOptions,
} from './ctc/prefixBeamSearch.ts';
export {
  editDistance,
  splitWords,
  charErrors,
  wordErrors,
  errorRate,
  ErrorRates,
  type ErrorCount,
} from './ctc/errorRates.ts';

/**
 * Trains a model and resolves when the run has ended (or rejects naming what went wrong).
 *
 * @param config - what to train: a config object as a YAML file would hold it (`defineConfig`
 *   types it; validated exactly like a file, with the same messages), a `RunConfig` from
 *   `loadConfig`, or the path of a YAML file.
 * @param options - how to run it (`out`, callbacks `onEvent`/`onStep`/`onEpoch`, `signal`, …,
 *   see `TrainOptions`) and, like the command line's flags, config overrides (`epochs`,
 *   `devices`, `strategy`, `lr`, `batchSize`, `seed`, `backend`, `dataDir`). An unknown key is an
 *   error naming it. For one process of a multi-process job pass
 *   `processes: rendezvousFromEnv(process.env)`.
 * @returns the run directory, test accuracy and loss, throughput, steps, the checkpoint's path and,
 *   when `signal` stopped it, where.
 */
export async function train(
  config: ConfigInput | RunConfig | string,
  options: TrainOptions & ConfigOverrides = {},
): Promise<TrainResult> {
  checkTrainOptions(options, OVERRIDE_KEYS);
  const resolved = typeof config === 'string' ? loadConfig(config) : resolveConfig(config);
  const runOptions: Record<string, unknown> = {},
    overrides: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(options)) {
    if ((TRAIN_OPTION_KEYS as readonly string[]).includes(key)) runOptions[key] = value;
    else overrides[key] = value;
  }
  return trainRun(
    applyOverrides(resolved, overrides as ConfigOverrides, 'train options', 'keys'),
    runOptions as TrainOptions,
  );
}
