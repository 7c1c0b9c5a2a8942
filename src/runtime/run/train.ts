import { useDeviceSlot } from '../../kernels/webgpu/deviceSlot.ts';
import { hostSlot } from '../device/deviceBackend.ts';
import { join } from 'node:path';
import { getBackend } from '../../kernels/index.ts';
import { loadData, type LoadedData } from './loadData.ts';
import { checkResumeText } from './resumeText.ts';
import { localStrategy } from '../../parallel/strategy.ts';
import { runDevice } from '../job/deviceRun.ts';
import { runWorkerDevices } from '../job/workerDevices.ts';
import { configHash, dataAgreements, type ProcessPlacement } from '../job/processWorld.ts';
import { firstDeviceOf, jobShapeOf } from '../job/jobShape.ts';
import { globalBatchSize } from '../device/trainLoop.ts';
import { checkLaunch, checkRun } from './inputChecks.ts';
import { planRunStart, openRunDir } from './openRun.ts';
import { takeBackUnformedRun } from './unformedRun.ts';
import { MetricsWriter } from '../events/metrics.ts';
import { RunLockHolder } from '../files/runLock.ts';
import { ProcessMetrics, type EventRecorder } from '../events/processMetrics.ts';
import { epochAggregator, type TrainEvent } from '../events/events.ts';
import { FaultPlan } from '../faults/faultPlan.ts';
import { allocateStopGate } from '../job/stop/protocol.ts';
import { StopGateDevice } from '../job/stop/deviceSide.ts';
import { StopControl } from '../job/stop/controlSide.ts';
import { stoppedAt } from '../job/stop/stopPoint.ts';
import { HoldSchedule, holdAgreement, holdsAtEpochEnds } from '../job/stop/holds.ts';
import { resolveTracking } from '../events/tracking.ts';
import { bestCheckpointOf, type BestCheckpoint } from '../checkpoint/bestCheckpoint.ts';
import type { RunConfig } from '../../config/runConfig.ts';
import type { TrainOptions } from './trainOptions.ts';
import { userCallbacks } from './callbacks.ts';
import { isDivergence } from '../device/divergenceGuard.ts';
import { resumeNote } from '../checkpoint/resumeNote.ts';

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
  /** the run was stopped (TrainOptions.signal) after `step` steps, its last in epoch `epoch` (0-based, as onEpoch's) */
  stopped?: { step: number; epoch: number; signal: string };
  /** the last evaluation of the validation split (absent without one); testLoss/testAccuracy are then the test set's, at the end */
  valLoss?: number;
  valAccuracy?: number;
  /** RUN_DIR/model-best.safetensors and the evaluation it holds the model of (train.best; absent: none written) */
  bestCheckpoint?: BestCheckpoint;
  /**
   * train.earlyStopping stopped the run after `step` steps, its last in epoch `epoch`: `metric` had not
   * improved for `patience` evaluations; its best was `best`, after epoch `bestEpoch` (epochs 0-based; both known in process 0)
   */
  earlyStopped?: { step: number; epoch: number; metric: string; patience: number; best?: number; bestEpoch?: number };
  /** a speech model (loss ctc): the last test evaluation's character and word error rates (greedy decoding) */
  testCER?: number;
  testWER?: number;
}

export { loadData, type LoadedData };

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
  // process 0 holds its run directory's lock from before it looks inside to after its last write
  const lock = new RunLockHolder(options.log);
  try {
    return await trainLocked(userConfig, options, load, lock);
  } finally {
    lock.release();
  }
}

async function trainLocked(
  userConfig: RunConfig,
  options: TrainOptions,
  load: (config: RunConfig) => Promise<LoadedData>,
  lock: RunLockHolder,
): Promise<TrainResult> {
  const world = options.processes && options.processes.worldSize > 1 ? options.processes : undefined;
  // the job's processes and devices, passed beside the config (whose train.devices is per process)
  const shape = jobShapeOf(userConfig.train.devices, world);
  const { threads, devices } = shape;
  const leader = shape.process === 0;
  const transport = options.transport ?? 'tcp';
  const faults = faultPlanOf(options);
  checkLaunch(shape, transport, faults);
  // resuming keeps the saved job's global batch and learning rate (fitted when the device count changed)
  const planned = planRunStart(options, userConfig, shape, lock);
  const { resume } = planned;
  // this thread runs device 0 of the process when it is the only one: its GPU is the process's first slot
  useDeviceSlot(hostSlot({ rank: 0, size: threads }));
  const backend = await getBackend(planned.config.train.backend);
  const data = await load(planned.config);
  if (resume) checkResumeText(resume.point.dir, data.train, options.log);
  // train.best and train.earlyStopping watch what this data can measure (config.yaml records the choice)
  const config = resolveTracking(planned.config, data);
  const parameters = checkRun(config, data, shape);
  // a caller that may stop the run from onEpoch: the devices wait at each epoch's end for its events' delivery
  const epochEnds = holdsAtEpochEnds(devices, options);
  const placement: ProcessPlacement | undefined = world && {
    process: shape.process,
    processes: shape.processes,
    masterAddr: world.masterAddr,
    masterPort: world.masterPort,
    configHash: configHash(userConfig),
    timeoutMs: options.timeoutMs ?? 300_000,
    transport,
    stallMs: config.train.stallWarningSeconds * 1000,
    agreements: [...dataAgreements(data.source, data.train, data.test, data.validation), holdAgreement(epochEnds)],
  };
  const { runDir, checkpoints, made } = openRunDir(options, config, resume, shape, configHash(config), lock);
  // a job of several processes has formed once a step is done; until then a new run directory is taken back on a failure
  let formed = !world;
  // a resumed run appends, --force or not (a launcher's restart keeps the job's flags)
  // processes other than 0 record their own devices' events beside it (processMetrics.ts)
  const metrics: EventRecorder | null = leader
    ? new MetricsWriter(runDir, { truncate: options.force && !resume, log: options.log })
    : checkpoints.runDir
      ? new ProcessMetrics(checkpoints.runDir, shape.process, Boolean(options.force) && !resume)
      : null;
  const checkpoint = leader ? join(runDir, 'model.safetensors') : '';
  const globalBatch = globalBatchSize(config, devices);
  const stepsPerEpoch = Math.ceil(data.train.count / globalBatch);
  // evaluated after epochs: the validation split, else the test set; the test set (when there is one) also at the end
  let last: { testLoss: number; testAccuracy: number; testCER?: number; testWER?: number } = {
    testLoss: NaN,
    testAccuracy: NaN,
  };
  let lastVal: { valLoss: number; valAccuracy: number } | null = null,
    devicesLost = 0;
  let verdict: Extract<TrainEvent, { type: 'earlyStopping' }> | null = null;
  // early stopping's verdicts and epoch ends hold the devices (holds.ts)
  const holds = new HoldSchedule(config, stepsPerEpoch, epochEnds, resume?.point.state);
  const stopGate = options.signal || config.train.earlyStopping ? allocateStopGate(threads, holds.first()) : undefined;
  const stopControl =
    stopGate &&
    new StopControl({ gate: stopGate, signal: options.signal, placement, threads, holds, log: options.log });
  // a callback that throws stops the run, which then rejects with its error (callbacks.ts)
  const callbacks = userCallbacks(options, threads, firstDeviceOf(shape));
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
      if (event.type === 'earlyStopping' && stopControl?.verdict(event.step, event.stop)) verdict = event;
      if (event.type === 'step') formed = true;
      if (event.type === 'deviceLost') {
        devicesLost++;
        stopControl?.deviceLost(event.rank - firstDeviceOf(shape));
      }
      metrics?.write(event);
      callbacks.sink(event);
    },
    firstDeviceOf(shape),
  );
  const started = performance.now();
  try {
    emit({
      type: 'start',
      runDir,
      dataSource: data.source,
      backend: backend.name,
      devices,
      processes: shape.processes,
      strategy: devices > 1 ? config.train.strategy.type : 'single device',
      parameters,
      trainSamples: data.train.count,
      testSamples: data.test?.count ?? 0,
      ...(data.validation ? { validationSamples: data.validation.count } : {}),
      epochs: config.train.epochs,
      stepsPerEpoch,
      globalBatch,
    });
    // the note people read under the run's first line (the command line prints what log gets)
    options.log?.(`data: ${data.source}`);
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
        shape,
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
        onGateWait: stopControl && ((local, step) => stopControl.deviceWaits(local, step)),
      });
    }
    await stopControl?.close();
    const ended = stoppedAt(stopControl?.decision, stepsPerEpoch, config.train.epochs, resume?.point.state.step);
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
    // a diverged run's error says what there is to resume from, as the run directory holds it
    if (leader && err instanceof Error && isDivergence(err.message)) err.message += resumeNote(runDir);
    if (made && made.before !== 'files' && !formed) {
      try {
        metrics?.close();
      } catch {
        // its file is taken back next: a failed last write there loses nothing
      }
      options.log?.(takeBackUnformedRun(made, lock));
    }
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
    ...(verdict ? { best: verdict.best, bestEpoch: verdict.bestEpoch } : {}),
  };
}
