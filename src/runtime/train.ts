import { join } from 'node:path';
import { getBackend } from '../kernels/index.ts';
import { loadFashionMnist } from '../data/fashionMnist.ts';
import { limitDataset, type Dataset } from '../data/dataset.ts';
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
import { planRunStart, openRunDir } from './openRun.ts';
import { MetricsWriter } from './metrics.ts';
import { epochAggregator, type EventSink, type TrainEvent } from './events.ts';
import { FaultPlan } from './faultPlan.ts';
import { allocateStopGate, StopGateDevice } from './stopGate.ts';
import { StopControl, stoppedAt } from './stopControl.ts';
import { resolveTracking } from './tracking.ts';
import { firstHold, holdAfter } from './evalSchedule.ts';
import { bestCheckpointOf, type BestCheckpoint } from './bestCheckpoint.ts';
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
  /** the command line that started the run, recorded in RUN_DIR/command.txt (the CLI gives its own; absent: the library call and its plain options are) */
  command?: readonly string[];
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
  /** the last evaluation of the validation split (absent without one); testLoss/testAccuracy are then the test set's, at the end */
  valLoss?: number;
  valAccuracy?: number;
  /** RUN_DIR/model-best.safetensors and the evaluation it holds the model of (train.best; absent: none written) */
  bestCheckpoint?: BestCheckpoint;
  /**
   * train.earlyStopping stopped the run after `step` steps, in epoch `epoch` (1-based): `metric` had not
   * improved for `patience` evaluations; its best was `best`, in epoch `bestEpoch` (1-based; both known in process 0)
   */
  earlyStopped?: { step: number; epoch: number; metric: string; patience: number; best?: number; bestEpoch?: number };
}

export interface LoadedData {
  train: Dataset;
  /** held out of training: evaluated after epochs instead of the test set, which is then evaluated once, at the end */
  validation?: Dataset;
  test: Dataset;
  source: string;
}

/** The configured dataset, limited as the config asks. */
export async function loadData(config: RunConfig, log?: (m: string) => void): Promise<LoadedData> {
  const data = await loadFashionMnist({ dir: config.data.dir, log });
  const train = config.data.trainLimit ? limitDataset(data.train, config.data.trainLimit) : data.train;
  const test = config.data.testLimit ? limitDataset(data.test, config.data.testLimit) : data.test;
  return { train, test, source: data.source };
}

/** Checks what can be checked before any device starts, so bad input fails fast and names the field. */
function checkRun(config: RunConfig, data: LoadedData, threads: number): number {
  checkDeviceThreads(threads);
  checkNotEmpty(data.train);
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
  const classes = model.outputShape[0]!;
  if (model.outputShape.length !== 1 || classes !== data.train.classes) {
    const last = config.model.layers.length - 1;
    throw new Error(`model.layers[${last}]: the model produces ${model.outputShape.join('×')} scores per sample but ${data.train.name} has ${data.train.classes} classes; end with a dense layer of ${data.train.classes} units`);
  }
  const { devices } = config.train;
  if (devices > 1) checkRunStrategy(config.train);
  const globalBatch = globalBatchSize(config);
  if (globalBatch < devices) {
    throw new Error(`data.batchSize: a global batch of ${globalBatch} cannot be split over ${devices} devices; use at least ${devices}`);
  }
  return model.parameterCount;
}

/** The run's injected faults, from `faults` or from the slowDevices/failAt shorthands. */
function faultPlanOf(options: TrainOptions): FaultPlan {
  const shorthand = options.slowDevices !== undefined || options.failAt !== undefined;
  if (options.faults && shorthand) throw new Error('TrainOptions: give the injected faults either as faults or as slowDevices/failAt, not both');
  return options.faults ?? (shorthand ? FaultPlan.fromOptions(options) : FaultPlan.none);
}

/** Trains one model as configured, writing metrics.jsonl and checkpoints into the run directory. */
export async function train(userConfig: RunConfig, options: TrainOptions = {}): Promise<TrainResult> {
  return runTraining(userConfig, options, (config) => loadData(config, options.log));
}

/** Trains on data already in memory (config.data only batches it): its splits as given. */
export async function trainOnData(userConfig: RunConfig, data: LoadedData, options: TrainOptions = {}): Promise<TrainResult> {
  return runTraining(userConfig, options, () => Promise.resolve(data));
}

async function runTraining(userConfig: RunConfig, options: TrainOptions, load: (config: RunConfig) => Promise<LoadedData>): Promise<TrainResult> {
  const world = options.processes && options.processes.worldSize > 1 ? options.processes : undefined;
  const threads = userConfig.train.devices;
  // the job's maths (global batch, sharding, lr scaling, strategy checks) count every device of every process
  const jobConfig: RunConfig = world ? { ...userConfig, train: { ...userConfig.train, devices: threads * world.worldSize } } : userConfig;
  const leader = !world || world.rank === 0;
  // resuming keeps the saved job's global batch and learning rate (fitted when the device count changed)
  const planned = planRunStart(options, jobConfig, leader);
  const { resume } = planned;
  const faults = faultPlanOf(options);
  faults.checkDevices(planned.config.train.devices);
  const backend = await getBackend(planned.config.train.backend);
  const data = await load(planned.config);
  // train.best and train.earlyStopping watch what this data can measure (config.yaml records the choice)
  const config = resolveTracking(planned.config, data);
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
    agreements: dataAgreements(data.source, data.train, data.test),
  };
  const { runDir, checkpoints } = openRunDir(options, { ...config, train: { ...config.train, devices: threads } }, resume, leader,
    world?.worldSize ?? 1, configHash(config));
  // a resumed run appends, --force or not (a launcher's restart keeps the job's flags)
  const metrics = leader ? new MetricsWriter(runDir, { truncate: options.force && !resume }) : null;
  const checkpoint = leader ? join(runDir, 'model.safetensors') : '';
  const globalBatch = globalBatchSize(config);
  const stepsPerEpoch = Math.ceil(data.train.count / globalBatch);
  let last = { testLoss: NaN, testAccuracy: NaN }, lastVal: { valLoss: number; valAccuracy: number } | null = null, devicesLost = 0;
  let verdict: Extract<TrainEvent, { type: 'earlyStopping' }> | null = null;
  // early stopping: the devices wait after each evaluation (from this step on) for device 0's verdict
  let hold = firstHold(config, stepsPerEpoch, resume?.point.state);
  const stopGate = options.signal || config.train.earlyStopping ? allocateStopGate(threads, hold) : undefined;
  const stopControl = stopGate && new StopControl({ gate: stopGate, signal: options.signal, placement, threads, log: options.log });
  // epochs are summarised over this process's devices (all of them unless the job spans processes)
  const emit = epochAggregator(threads, (event: TrainEvent) => {
    if (event.type === 'eval' && event.testLoss !== undefined) last = { testLoss: event.testLoss, testAccuracy: event.testAccuracy! };
    if (event.type === 'eval' && event.valLoss !== undefined) lastVal = { valLoss: event.valLoss, valAccuracy: event.valAccuracy! };
    if (event.type === 'earlyStopping' && stopControl && hold !== null && event.step === hold + 1) {
      verdict = event;
      if (event.stop) stopControl.stopEarly(hold);
      else stopControl.release(hold = holdAfter(config, stepsPerEpoch, event.epoch));
    }
    if (event.type === 'deviceLost') devicesLost++;
    metrics?.write(event);
    options.onEvent?.(event);
  }, world ? world.rank * threads : 0);
  const started = performance.now();
  try {
    emit({
      type: 'start', runDir, dataSource: data.source, backend: backend.name, devices, processes: world?.worldSize ?? 1,
      strategy: devices > 1 ? config.train.strategy.type : 'single device', parameters,
      trainSamples: data.train.count, testSamples: data.test.count, ...(data.validation ? { validationSamples: data.validation.count } : {}), epochs: config.train.epochs, stepsPerEpoch, globalBatch,
    });
    if (resume) emit(resume.event);
    if (devices === 1) {
      await runDevice({
        config, rank: 0, worldSize: 1, backend, strategy: localStrategy, train: data.train, validation: data.validation ?? null, test: data.test,
        checkpointPath: checkpoint, emit, shared: false, faults, checkpoints, mayStart: stopGate && StopGateDevice.check(stopGate, 0, true),
      });
    } else {
      await runWorkerDevices({ config, threads, placement, train: data.train, validation: data.validation, test: data.test, checkpointPath: leader ? checkpoint : null,
        checkpoints, emit, faults, log: options.log, stopGate });
    }
    await stopControl?.close();
    const ended = stoppedAt(stopControl?.decision, stepsPerEpoch, config.train.epochs);
    const early = ended?.signal === 'earlyStopping' ? earlyStopOf(ended, config, verdict) : undefined;
    const stopped = early ? undefined : ended;
    if (stopped) emit({ type: 'stopped', ...stopped });
    if (early) emit({ type: 'earlyStopped', ...early, best: early.best ?? NaN, bestEpoch: early.bestEpoch ?? NaN });
    const seconds = (performance.now() - started) / 1000;
    // every device sees every one of its samples once per epoch (no sample is dropped)
    // a resumed run counts the steps it ran; a stopped one those before the stop
    const startStep = resume ? resume.point.state.step : 0;
    const endStep = ended ? ended.step : stepsPerEpoch * config.train.epochs;
    const samplesPerSecond = Math.max(0, Math.min(endStep * globalBatch, data.train.count * config.train.epochs) - startStep * globalBatch) / seconds;
    const bestCheckpoint = leader && config.train.best ? bestCheckpointOf(runDir) : null;
    const result: TrainResult = {
      runDir, testAccuracy: last.testAccuracy, testLoss: last.testLoss, samplesPerSecond, seconds,
      steps: ended?.step ?? stepsPerEpoch * config.train.epochs, checkpoint, ...(stopped ? { stopped } : {}),
      ...(lastVal ?? {}), ...(bestCheckpoint ? { bestCheckpoint } : {}), ...(early ? { earlyStopped: early } : {}),
    };
    emit({ type: 'end', seconds, samplesPerSecond, testAccuracy: last.testAccuracy, testLoss: last.testLoss, ...(lastVal ?? {}),
      maxRssBytes: process.resourceUsage().maxRSS * 1024, ...(devicesLost ? { devicesLost } : {}) });
    return result;
  } finally {
    await stopControl?.close();
    metrics?.close();
  }
}

/** What an early stop reports: where, and (process 0, from device 0's last verdict) the watched metric's best. */
function earlyStopOf(at: { step: number; epoch: number }, config: RunConfig, verdict: Extract<TrainEvent, { type: 'earlyStopping' }> | null): NonNullable<TrainResult['earlyStopped']> {
  const spec = config.train.earlyStopping;
  const metric = verdict?.metric ?? (spec ? spec.metric : '?');
  return { step: at.step, epoch: at.epoch, metric, patience: spec ? spec.patience : 0,
    ...(verdict ? { best: verdict.best, bestEpoch: verdict.bestEpoch + 1 } : {}) };
}
