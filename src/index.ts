/**
 * The paratrain library: load a YAML config, train it (optionally overriding fields, as the CLI
 * flags do), evaluate checkpoints.
 */
import { applyOverrides, type ConfigOverrides, type RunConfig } from './config/index.ts';
import { train as trainRun, type TrainOptions, type TrainResult } from './runtime/train.ts';

export { loadConfig, parseConfig, applyOverrides, ConfigError } from './config/index.ts';
export type { ConfigOverrides, RunConfig, TrainSpec } from './config/index.ts';
export type { TrainOptions, TrainResult } from './runtime/train.ts';
export type { TrainEvent } from './runtime/events.ts';
export { FaultPlan, type FaultPlanData } from './runtime/faultPlan.ts';
export { readMetrics } from './runtime/metrics.ts';
export { readCheckpoint, writeCheckpoint } from './runtime/checkpoint.ts';
export { getBackend, registeredBackends } from './kernels/index.ts';
export { rendezvousFromEnv, type RendezvousInfo } from './comm/rendezvous.ts';
export { memoryDataset, removeMemoryDataset, type MemoryArrays, type MemorySamples } from './data/memory.ts';
// speech: CTC loss, decoding and error rates (the training loop uses them through loss: ctc and data: { dataset: speech })
export { CtcLoss, ctcGradScale, ctcReducedLoss, ctcMinFrames } from './nn/ctcLoss.ts';
export type { CtcLossOptions, CtcLossResult, CtcReduction, CtcTargets } from './nn/ctcLoss.ts';
export { greedyDecode, greedyDecodeBatch, labelsToText } from './speech/ctcDecode.ts';
export { prefixBeamSearch, beamSearchBatch, type BeamHypothesis, type BeamSearchOptions } from './speech/prefixBeamSearch.ts';
export { editDistance, splitWords, charErrors, wordErrors, errorRate, ErrorRates, type ErrorCount } from './speech/errorRates.ts';

/**
 * Trains `config`; `options` may override config fields (devices, strategy, epochs, …) like the CLI
 * flags. For one process of a multi-process job pass `processes: rendezvousFromEnv(process.env)`.
 */
export async function train(config: RunConfig, options: TrainOptions & ConfigOverrides = {}): Promise<TrainResult> {
  const { out, force, onEvent, log, faults, slowDevices, failAt, processes, timeoutMs, transport, resume, initFrom, ...overrides } = options;
  return trainRun(applyOverrides(config, overrides), { out, force, onEvent, log, faults, slowDevices, failAt, processes, timeoutMs, transport, resume, initFrom });
}
