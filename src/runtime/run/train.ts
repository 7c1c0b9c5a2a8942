import { join } from 'node:path';
import { getBackend } from '../../kernels/index.ts';
import { outputUnits, taskOf } from '../../data/dataset.ts';
import { loadData, type LoadedData } from './loadData.ts';
import { localStrategy } from '../../parallel/strategy.ts';
import { checkRunStrategy, runsModelParallel } from '../../parallel/strategies/index.ts';
import { buildModel } from '../../nn/model.ts';
import {
  modelParallelLayers,
  modelParallelStrategyMessage,
  planModelParallelFrom,
} from '../../parallel/modelParallel/plan.ts';
import { jsBackend } from '../../kernels/js/index.ts';
import { runDevice } from '../job/deviceRun.ts';
import { runWorkerDevices } from '../job/workerDevices.ts';
import { spinFromEnv } from '../../comm/shm/index.ts';
import { configHash, dataAgreements, type ProcessPlacement } from '../job/processWorld.ts';
import { globalBatchSize } from '../device/trainLoop.ts';
import { checkDataShape, checkDeviceThreads, checkModelFits, checkNotEmpty } from './inputChecks.ts';
import { checkLossMatchesData } from './lossChecks.ts';
import { checkSpeechRun } from './speechChecks.ts';
import { planRunStart, openRunDir } from './openRun.ts';
import { MetricsWriter } from '../events/metrics.ts';
import { ProcessMetrics, type EventRecorder } from '../events/processMetrics.ts';
import { epochAggregator, type EventSink, type TrainEvent } from '../events/events.ts';
import { FaultPlan } from '../faults/faultPlan.ts';
import { allocateStopGate, StopGateDevice } from '../job/stopGate.ts';
import { StopControl, stoppedAt } from '../job/stopControl.ts';
import { resolveTracking } from '../events/tracking.ts';
import { firstHold, holdAfter } from '../eval/evalSchedule.ts';
import { bestCheckpointOf, type BestCheckpoint } from '../checkpoint/bestCheckpoint.ts';
import type { RunConfig } from '../../config/runConfig.ts';
import type { TrainOptions } from './trainOptions.ts';
import { userCallbacks } from './callbacks.ts';

export type { TrainOptions } from './trainOptions.ts';

/** What a finished (or stopped) run reports. */
export interface TrainResult {
  /** '' in processes other than 0 of a multi-process job */
  runDir: string;
  /** accuracy on the test set at the last evaluation (NaN when none ran) */
  testAccuracy: number;
  /** mean loss on the test set at the last evaluation (NaN when none ran) */
  testLoss: number;
  /** training samples per second over the run (every device's) */
  samplesPerSecond: number;
  /** the run's wall time */
  seconds: number;
  /** global steps the run ended at */
  steps: number;
  /** the model checkpoint (RUN_DIR/model.safetensors; '' in processes other than 0), for loadModel and eval */
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
  /** a speech model (loss ctc): the last test evaluation's character and word error rates (greedy decoding) */
  testCER?: number;
  testWER?: number;
}

export { loadData, type LoadedData };

/** Checks what can be checked before any device starts, so bad input fails fast and names the field. */
function checkRun(config: RunConfig, data: LoadedData, threads: number): number {
  checkDeviceThreads(threads);
  spinFromEnv();
  checkNotEmpty(data.train);
  checkSpeechRun(config, data);
  checkDataShape(config, data);
  checkModelFits(config, threads);
  const model = buildModel(jsBackend, config.model);
  const split = modelParallelLayers(config.model);
  if (split.length && config.train.devices > 1) {
    if (!runsModelParallel(config.train.strategy))
      throw new Error(`train.strategy: ${modelParallelStrategyMessage(config.model, config.train.strategy.type)}`);
    // (the schema checks these per process; a job of several processes has more devices than its config says)
    if (config.train.microBatches > 1) {
      throw new Error(
        `train.microBatches: micro-batching is not supported together with model-parallel layers ('parallel: model') on several devices; use microBatches: 1 or make the layers data-parallel`,
      );
    }
    planModelParallelFrom(
      config.model,
      config.train.devices,
      model.layers.map((l) => l.inputShape),
    );
  }
  // the loss must fit the task first: its message says more than a count of output units
  checkLossMatchesData(config, data.train, model.outputShape);
  checkOutputUnits(config, model.outputShape, data);
  const { devices } = config.train;
  if (devices > 1) checkRunStrategy(config.train);
  const globalBatch = globalBatchSize(config);
  if (globalBatch < devices) {
    throw new Error(
      `data.batchSize: a global batch of ${globalBatch} cannot be split over ${devices} devices; use at least ${devices}`,
    );
  }
  return model.parameterCount;
}

/** The last layer gives one score per class (classification) or one value per target: sizes from the data. */
function checkOutputUnits(config: RunConfig, outputShape: readonly number[], data: LoadedData): void {
  const units = outputUnits(data.train),
    task = taskOf(data.train);
  if (task === 'transcription') return; // per frame, against the alphabet: speechChecks.ts
  if (outputShape.length === 1 && outputShape[0] === units) return;
  const last = config.model.layers.length - 1;
  const what =
    task === 'classification'
      ? `${units} classes`
      : task === 'regression'
        ? `${units} regression target${units === 1 ? '' : 's'}`
        : `${units} labels (multi-label)`;
  const per = task === 'regression' ? 'values' : 'scores';
  throw new Error(
    `model.layers[${last}]: the model produces ${outputShape.join('×')} ${per} per sample but ${data.train.name} has ${what}; end with a dense layer of ${units} units`,
  );
}

/** The run's injected faults, from `faults` or from the slowDevices/failAt shorthands. */
function faultPlanOf(options: TrainOptions): FaultPlan {
  const shorthand = options.slowDevices !== undefined || options.failAt !== undefined;
  if (options.faults && shorthand)
    throw new Error('TrainOptions: give the injected faults either as faults or as slowDevices/failAt, not both');
  return options.faults ?? (shorthand ? FaultPlan.fromOptions(options) : FaultPlan.none);
}

/** Trains one model as configured, writing metrics.jsonl and checkpoints into the run directory. */
export async function train(userConfig: RunConfig, options: TrainOptions = {}): Promise<TrainResult> {
  return runTraining(userConfig, options, (config) => loadData(config, options.log));
}

/** Trains on data already in memory (config.data only batches it): its splits as given. */
export async function trainOnData(
  userConfig: RunConfig,
  data: LoadedData,
  options: TrainOptions = {},
): Promise<TrainResult> {
  return runTraining(userConfig, options, () => Promise.resolve(data));
}

async function runTraining(
  userConfig: RunConfig,
  options: TrainOptions,
  load: (config: RunConfig) => Promise<LoadedData>,
): Promise<TrainResult> {
  const world = options.processes && options.processes.worldSize > 1 ? options.processes : undefined;
  const threads = userConfig.train.devices;
  // the job's maths (global batch, sharding, lr scaling, strategy checks) count every device of every process
  const jobConfig: RunConfig = world
    ? { ...userConfig, train: { ...userConfig.train, devices: threads * world.worldSize } }
    : userConfig;
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
    throw new Error(
      `--transport mpi: each process runs one device (MPI is driven by one thread per process), but train.devices is ${threads}; ` +
        `use --devices 1 and start more processes (mpirun -np ${threads * world.worldSize}), or --transport tcp`,
    );
  }
  const placement: ProcessPlacement | undefined = world && {
    process: world.rank,
    processes: world.worldSize,
    masterAddr: world.masterAddr,
    masterPort: world.masterPort,
    configHash: configHash(userConfig),
    timeoutMs: options.timeoutMs ?? 300_000,
    transport,
    stallMs: config.train.stallWarningSeconds * 1000,
    agreements: dataAgreements(data.source, data.train, data.test, data.validation),
  };
  const { runDir, checkpoints } = openRunDir(
    options,
    { ...config, train: { ...config.train, devices: threads } },
    resume,
    leader,
    world?.worldSize ?? 1,
    configHash(config),
  );
  // a resumed run appends, --force or not (a launcher's restart keeps the job's flags)
  // processes other than 0 record their own devices' events beside it (processMetrics.ts)
  const metrics: EventRecorder | null = leader
    ? new MetricsWriter(runDir, { truncate: options.force && !resume })
    : checkpoints.runDir
      ? new ProcessMetrics(checkpoints.runDir, world!.rank, Boolean(options.force) && !resume)
      : null;
  const checkpoint = leader ? join(runDir, 'model.safetensors') : '';
  const globalBatch = globalBatchSize(config);
  const stepsPerEpoch = Math.ceil(data.train.count / globalBatch);
  // evaluated after epochs: the validation split, else the test set; the test set (when there is one) also at the end
  let last: { testLoss: number; testAccuracy: number; testCER?: number; testWER?: number } = {
    testLoss: NaN,
    testAccuracy: NaN,
  };
  let lastVal: { valLoss: number; valAccuracy: number } | null = null,
    devicesLost = 0;
  let verdict: Extract<TrainEvent, { type: 'earlyStopping' }> | null = null;
  // early stopping: the devices wait after each evaluation (from this step on) for device 0's verdict
  let hold = firstHold(config, stepsPerEpoch, resume?.point.state);
  const stopGate = options.signal || config.train.earlyStopping ? allocateStopGate(threads, hold) : undefined;
  const stopControl =
    stopGate && new StopControl({ gate: stopGate, signal: options.signal, placement, threads, log: options.log });
  // a callback that throws stops the run, which then rejects with its error (callbacks.ts)
  const callbacks = userCallbacks(options, threads, world ? world.rank * threads : 0);
  // epochs are summarised over this process's devices (all of them unless the job spans processes)
  const emit = epochAggregator(
    threads,
    (event: TrainEvent) => {
      if (event.type === 'eval' && event.testLoss !== undefined) {
        last = {
          testLoss: event.testLoss,
          testAccuracy: event.testAccuracy!,
          ...(event.testCER !== undefined ? { testCER: event.testCER, testWER: event.testWER! } : {}),
        };
      }
      if (event.type === 'eval' && event.valLoss !== undefined)
        lastVal = { valLoss: event.valLoss, valAccuracy: event.valAccuracy! };
      if (event.type === 'earlyStopping' && stopControl && hold !== null && event.step === hold + 1) {
        verdict = event;
        if (event.stop) stopControl.stopEarly(hold);
        else stopControl.release((hold = holdAfter(config, stepsPerEpoch, event.epoch)));
      }
      if (event.type === 'deviceLost') devicesLost++;
      metrics?.write(event);
      callbacks.sink(event);
    },
    world ? world.rank * threads : 0,
  );
  const started = performance.now();
  try {
    emit({
      type: 'start',
      runDir,
      dataSource: data.source,
      backend: backend.name,
      devices,
      processes: world?.worldSize ?? 1,
      strategy: devices > 1 ? config.train.strategy.type : 'single device',
      parameters,
      trainSamples: data.train.count,
      testSamples: data.test?.count ?? 0,
      ...(data.validation ? { validationSamples: data.validation.count } : {}),
      epochs: config.train.epochs,
      stepsPerEpoch,
      globalBatch,
    });
    if (resume) emit(resume.event);
    if (devices === 1) {
      await runDevice({
        config,
        rank: 0,
        worldSize: 1,
        backend,
        strategy: localStrategy,
        train: data.train,
        validation: data.validation ?? null,
        test: data.test ?? null,
        checkpointPath: checkpoint,
        emit,
        shared: false,
        faults,
        checkpoints,
        mayStart: stopGate && StopGateDevice.check(stopGate, 0, true),
      });
    } else {
      await runWorkerDevices({
        config,
        threads,
        placement,
        train: data.train,
        validation: data.validation,
        test: data.test ?? null,
        checkpointPath: leader ? checkpoint : null,
        checkpoints,
        emit,
        faults,
        log: options.log,
        stopGate,
      });
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
    const samplesPerSecond =
      Math.max(0, Math.min(endStep * globalBatch, data.train.count * config.train.epochs) - startStep * globalBatch) /
      seconds;
    const bestCheckpoint = leader && config.train.best ? bestCheckpointOf(runDir) : null;
    const errorRates = last.testCER !== undefined ? { testCER: last.testCER, testWER: last.testWER! } : {};
    const result: TrainResult = {
      runDir,
      testAccuracy: last.testAccuracy,
      testLoss: last.testLoss,
      ...errorRates,
      samplesPerSecond,
      seconds,
      steps: ended?.step ?? stepsPerEpoch * config.train.epochs,
      checkpoint,
      ...(stopped ? { stopped } : {}),
      ...(lastVal ?? {}),
      ...(bestCheckpoint ? { bestCheckpoint } : {}),
      ...(early ? { earlyStopped: early } : {}),
    };
    emit({
      type: 'end',
      seconds,
      samplesPerSecond,
      testAccuracy: last.testAccuracy,
      testLoss: last.testLoss,
      ...(lastVal ?? {}),
      ...errorRates,
      maxRssBytes: process.resourceUsage().maxRSS * 1024,
      ...(devicesLost ? { devicesLost } : {}),
    });
    return result;
  } catch (err) {
    // the devices stopped because a callback threw: that is the error to report
    throw callbacks.failure ? callbacks.failure.error : err;
  } finally {
    await stopControl?.close();
    metrics?.close();
  }
}

/** What an early stop reports: where, and (process 0, from device 0's last verdict) the watched metric's best. */
function earlyStopOf(
  at: { step: number; epoch: number },
  config: RunConfig,
  verdict: Extract<TrainEvent, { type: 'earlyStopping' }> | null,
): NonNullable<TrainResult['earlyStopped']> {
  const spec = config.train.earlyStopping;
  const metric = verdict?.metric ?? (spec ? spec.metric : '?');
  return {
    step: at.step,
    epoch: at.epoch,
    metric,
    patience: spec ? spec.patience : 0,
    ...(verdict ? { best: verdict.best, bestEpoch: verdict.bestEpoch + 1 } : {}),
  };
}
