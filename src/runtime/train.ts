import { join } from 'node:path';
import { getBackend } from '../kernels/index.ts';
import { outputUnits, taskOf } from '../data/dataset.ts';
import { loadData, type LoadedData } from './loadData.ts';
import { localStrategy } from '../parallel/strategy.ts';
import { checkRunStrategy, runsModelParallel } from '../parallel/strategies/index.ts';
import { buildModel } from '../nn/model.ts';
import { modelParallelLayers, modelParallelStrategyMessage, planModelParallelFrom } from '../parallel/modelParallel/plan.ts';
import { jsBackend } from '../kernels/js/index.ts';
import { runDevice } from './device.ts';
import { runWorkerDevices } from './workerDevices.ts';
import { configHash, dataAgreements, type ProcessPlacement } from './processWorld.ts';
import { globalBatchSize } from './trainLoop.ts';
import { checkDataShape, checkDeviceThreads, checkModelFits, checkNotEmpty } from './inputChecks.ts';
import { checkLossMatchesData } from './lossChecks.ts';
import { checkSpeechRun } from './speechChecks.ts';
import { planRunStart, openRunDir } from './openRun.ts';
import { MetricsWriter } from './metrics.ts';
import { epochAggregator, type EventSink, type TrainEvent } from './events.ts';
import { FaultPlan } from './faultPlan.ts';
import { allocateStopGate, StopGateDevice } from './stopGate.ts';
import { StopControl, stoppedAt } from './stopControl.ts';
import type { RunConfig } from '../config/runConfig.ts';

export interface TrainOptions {
  /** run directory; default runs/<timestamp> with runs/latest pointing at it */
  out?: string;
  /** allow writing into a non-empty --out directory */
  force?: boolean;
  /** receives every event (progress display) */
  onEvent?: EventSink;
  /** notes for people (data source, fall-backs) */
  log?: (message: string) => void;
  /** injected faults (stragglers, a failing device), for testing; or give them as slowDevices/failAt */
  faults?: FaultPlan;
  /** straggler injection: device rank → slowdown factor (≥ 1) */
  slowDevices?: Map<number, number>;
  /** failure injection for tests: device `rank` throws at global step `step` */
  failAt?: { rank: number; step: number };
  /**
   * The job spans several processes (rendezvousFromEnv gives these); each runs train.devices
   * device threads, so the job has processes × train.devices devices. Process 0 writes the run
   * directory, evaluates and checkpoints; the others only train.
   */
  processes?: { rank: number; worldSize: number; masterAddr: string; masterPort: number };
  /** rendezvous and communication deadline across processes, ms (default 300 000) */
  timeoutMs?: number;
  /** what carries collectives between processes: tcp (default) or mpi (under mpirun, one device per process) */
  transport?: 'tcp' | 'mpi';
  /** continue the run in this directory from its newest complete checkpoint set (docs/architecture.md, checkpoint sets) */
  resume?: string;
  /** start a new run from this checkpoint's weights and state (fresh optimizer, step 0) */
  initFrom?: string;
  /**
   * Aborting it stops the run gracefully: every device (of every process) finishes the step in
   * flight, all agree on one last step, and the run ends as if it were the last (the final
   * checkpoint is written; result.stopped says so). Its reason names the cause ('SIGINT', 'SIGTERM').
   * In a job of several processes give it to every process or to none (they form a control world for it).
   */
  signal?: AbortSignal;
}

export interface TrainResult {
  /** '' in processes other than 0 of a multi-process job */
  runDir: string;
  testAccuracy: number;
  testLoss: number;
  samplesPerSecond: number;
  seconds: number;
  steps: number;
  checkpoint: string;
  /** the run was stopped (TrainOptions.signal) after `step` steps, in epoch `epoch` (1-based) */
  stopped?: { step: number; epoch: number; signal: string };
  /** a speech model (loss ctc): the last test evaluation's character and word error rates (greedy decoding) */
  testCER?: number;
  testWER?: number;
}

export { loadData, type LoadedData };

/** Checks what can be checked before any device starts, so bad input fails fast and names the field. */
function checkRun(config: RunConfig, data: LoadedData, threads: number): number {
  checkDeviceThreads(threads);
  checkNotEmpty(data.train);
  checkSpeechRun(config, data);
  checkDataShape(config, data);
  checkModelFits(config, threads);
  const model = buildModel(jsBackend, config.model);
  const split = modelParallelLayers(config.model);
  if (split.length && config.train.devices > 1) {
    if (!runsModelParallel(config.train.strategy)) throw new Error(`train.strategy: ${modelParallelStrategyMessage(config.model, config.train.strategy.type)}`);
    // (the schema checks these per process; a job of several processes has more devices than its config says)
    if (config.train.microBatches > 1) {
      throw new Error(`train.microBatches: micro-batching is not supported together with model-parallel layers ('parallel: model') on several devices; use microBatches: 1 or make the layers data-parallel`);
    }
    planModelParallelFrom(config.model, config.train.devices, model.layers.map((l) => l.inputShape));
  }
  // the loss must fit the task first: its message says more than a count of output units
  checkLossMatchesData(config, data.train, model.outputShape);
  checkOutputUnits(config, model.outputShape, data);
  const { devices } = config.train;
  if (devices > 1) checkRunStrategy(config.train);
  const globalBatch = globalBatchSize(config);
  if (globalBatch < devices) {
    throw new Error(`data.batchSize: a global batch of ${globalBatch} cannot be split over ${devices} devices; use at least ${devices}`);
  }
  return model.parameterCount;
}

/** The last layer gives one score per class (classification) or one value per target: sizes from the data. */
function checkOutputUnits(config: RunConfig, outputShape: readonly number[], data: LoadedData): void {
  const units = outputUnits(data.train), task = taskOf(data.train);
  if (task === 'transcription') return; // per frame, against the alphabet: speechChecks.ts
  if (outputShape.length === 1 && outputShape[0] === units) return;
  const last = config.model.layers.length - 1;
  const what = task === 'classification' ? `${units} classes` : task === 'regression' ? `${units} regression target${units === 1 ? '' : 's'}` : `${units} labels (multi-label)`;
  const per = task === 'regression' ? 'values' : 'scores';
  throw new Error(`model.layers[${last}]: the model produces ${outputShape.join('×')} ${per} per sample but ${data.train.name} has ${what}; end with a dense layer of ${units} units`);
}

/** The run's injected faults, from `faults` or from the slowDevices/failAt shorthands. */
function faultPlanOf(options: TrainOptions): FaultPlan {
  const shorthand = options.slowDevices !== undefined || options.failAt !== undefined;
  if (options.faults && shorthand) throw new Error('TrainOptions: give the injected faults either as faults or as slowDevices/failAt, not both');
  return options.faults ?? (shorthand ? FaultPlan.fromOptions(options) : FaultPlan.none);
}

/** Trains one model as configured, writing metrics.jsonl and checkpoints into the run directory. */
export async function train(userConfig: RunConfig, options: TrainOptions = {}): Promise<TrainResult> {
  const world = options.processes && options.processes.worldSize > 1 ? options.processes : undefined;
  const threads = userConfig.train.devices;
  // the job's maths (global batch, sharding, lr scaling, strategy checks) count every device of every process
  const jobConfig: RunConfig = world ? { ...userConfig, train: { ...userConfig.train, devices: threads * world.worldSize } } : userConfig;
  const leader = !world || world.rank === 0;
  // resuming keeps the saved job's global batch and learning rate (fitted when the device count changed)
  const { config, resume } = planRunStart(options, jobConfig, leader);
  const faults = faultPlanOf(options);
  faults.checkDevices(config.train.devices);
  const backend = await getBackend(config.train.backend);
  const data = await loadData(config, options.log);
  const parameters = checkRun(config, data, threads);
  const devices = config.train.devices;
  const transport = options.transport ?? 'tcp';
  if (transport === 'mpi' && world && threads > 1) {
    throw new Error(`--transport mpi: each process runs one device (MPI is driven by one thread per process), but train.devices is ${threads}; ` +
      `use --devices 1 and start more processes (mpirun -np ${threads * world.worldSize}), or --transport tcp`);
  }
  const placement: ProcessPlacement | undefined = world && {
    process: world.rank, processes: world.worldSize, masterAddr: world.masterAddr, masterPort: world.masterPort,
    configHash: configHash(userConfig), timeoutMs: options.timeoutMs ?? 300_000, transport, stallMs: config.train.stallWarningSeconds * 1000,
    agreements: dataAgreements(data.source, data.train, data.test, data.validation),
  };
  const { runDir, checkpoints } = openRunDir(options, { ...config, train: { ...config.train, devices: threads } }, resume, leader,
    world?.worldSize ?? 1, configHash(config));
  // a resumed run appends, --force or not (a launcher's restart keeps the job's flags)
  const metrics = leader ? new MetricsWriter(runDir, { truncate: options.force && !resume }) : null;
  const checkpoint = leader ? join(runDir, 'model.safetensors') : '';
  const globalBatch = globalBatchSize(config);
  const stepsPerEpoch = Math.ceil(data.train.count / globalBatch);
  // evaluated after epochs: the test set as before, else the validation set (a CSV without a test file)
  const evaluation = data.test ?? data.validation ?? null;
  // with both, the validation set is evaluated too (val… fields: a speech dataset's dev.csv)
  const validation = data.test && data.validation ? data.validation : null;
  let last: { testLoss: number; testAccuracy: number; testCER?: number; testWER?: number } = { testLoss: NaN, testAccuracy: NaN }, devicesLost = 0;
  // epochs are summarised over this process's devices (all of them unless the job spans processes)
  const emit = epochAggregator(threads, (event: TrainEvent) => {
    if (event.type === 'eval') last = event;
    if (event.type === 'deviceLost') devicesLost++;
    metrics?.write(event);
    options.onEvent?.(event);
  }, world ? world.rank * threads : 0);
  const started = performance.now();
  const stopGate = options.signal && allocateStopGate(threads);
  const stopControl = stopGate && new StopControl({ gate: stopGate, signal: options.signal!, placement, threads, log: options.log });
  try {
    emit({
      type: 'start', runDir, dataSource: data.source, backend: backend.name, devices, processes: world?.worldSize ?? 1,
      strategy: devices > 1 ? config.train.strategy.type : 'single device', parameters,
      trainSamples: data.train.count, testSamples: evaluation?.count ?? 0, epochs: config.train.epochs, stepsPerEpoch, globalBatch,
    });
    if (resume) emit(resume.event);
    if (devices === 1) {
      await runDevice({
        config, rank: 0, worldSize: 1, backend, strategy: localStrategy, train: data.train, test: evaluation, validation,
        checkpointPath: checkpoint, emit, shared: false, faults, checkpoints, mayStart: stopGate && StopGateDevice.check(stopGate, 0, true),
      });
    } else {
      await runWorkerDevices({ config, threads, placement, train: data.train, test: evaluation, validation, checkpointPath: leader ? checkpoint : null,
        checkpoints, emit, faults, log: options.log, stopGate });
    }
    await stopControl?.close();
    const stopped = stoppedAt(stopControl?.decision, stepsPerEpoch, config.train.epochs);
    if (stopped) emit({ type: 'stopped', ...stopped });
    const seconds = (performance.now() - started) / 1000;
    // every device sees every one of its samples once per epoch (no sample is dropped)
    // a resumed run counts the steps it ran; a stopped one those before the stop
    const startStep = resume ? resume.point.state.step : 0;
    const endStep = stopped ? stopped.step : stepsPerEpoch * config.train.epochs;
    const samplesPerSecond = Math.max(0, Math.min(endStep * globalBatch, data.train.count * config.train.epochs) - startStep * globalBatch) / seconds;
    const errorRates = last.testCER !== undefined ? { testCER: last.testCER, testWER: last.testWER! } : {};
    const result: TrainResult = {
      runDir, testAccuracy: last.testAccuracy, testLoss: last.testLoss, ...errorRates, samplesPerSecond, seconds,
      steps: stopped?.step ?? stepsPerEpoch * config.train.epochs, checkpoint, ...(stopped ? { stopped } : {}),
    };
    emit({ type: 'end', seconds, samplesPerSecond, testAccuracy: last.testAccuracy, testLoss: last.testLoss, ...errorRates,
      maxRssBytes: process.resourceUsage().maxRSS * 1024, ...(devicesLost ? { devicesLost } : {}) });
    return result;
  } finally {
    await stopControl?.close();
    metrics?.close();
  }
}
