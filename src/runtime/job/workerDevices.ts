import { availableParallelism } from 'node:os';
import { shareDataset, type Dataset } from '../../data/dataset.ts';
import { buildModel } from '../../nn/model.ts';
import { jsBackend } from '../../kernels/js/index.ts';
import { createShmWorld } from '../../comm/shm/index.ts';
import { needsParameterServer, survivesLostDevices } from '../../parallel/strategies/index.ts';
import { allocateParameterServer, markDeviceDone } from '../../parallel/parameterServer/shared.ts';
import { frozenRanges } from '../device/frozenLayers.ts';
import { LostDevices, lostLinkReason, threadLosses } from './lostDevices.ts';
import { deviceName } from './deviceNames.ts';
import { firstDeviceOf, type JobShape } from './jobShape.ts';
import type { DeviceWorkerInit, DeviceWorkerMessage } from './deviceWorker.ts';
import { spawnModuleWorker } from './spawnWorker.ts';
import { hostParameterServer } from './parameterServerProcess.ts';
import { crossWorldOf, parameterServerWorldOf, type ProcessPlacement } from './processWorld.ts';
import type { EventSink } from '../events/events.ts';
import type { FaultPlan } from '../faults/faultPlan.ts';
import type { CheckpointSetup } from '../checkpoint/checkpointSetup.ts';
import { serverStart } from '../checkpoint/serverState.ts';
import { abortStopGate } from './stop/controlSide.ts';
import type { StopGateMemory } from './stop/protocol.ts';
import type { RunConfig } from '../../config/runConfig.ts';

export interface WorkerDevicesOptions {
  config: RunConfig;
  /** the job's processes and devices; this process runs shape.threads of them */
  shape: JobShape;
  /** where this process sits in a multi-process job; absent: the job is this process */
  placement?: ProcessPlacement;
  train: Dataset;
  /** a validation split device 0 evaluates on after epochs (a speech dataset's dev.csv) */
  validation?: Dataset | null;
  /** evaluated by device 0 (after epochs without a validation split, else at the end; none: no evaluation) */
  test: Dataset | null;
  checkpointPath: string | null;
  checkpoints: CheckpointSetup;
  emit: EventSink;
  faults: FaultPlan;
  /** this process's stop gate (stop/protocol.ts); absent: the run cannot be stopped */
  stopGate?: StopGateMemory;
  /** device thread `local` waits at the stop gate before `step`, every event it sent before delivered */
  onGateWait?: (local: number, step: number) => void;
  log?: (message: string) => void;
}

/**
 * Runs this process's devices, one per worker thread over a shared-memory world, and relays their
 * events. Devices of other processes are reached through each thread's cross-process
 * communicator (hierarchical collectives); parameter-server strategies then use a server in
 * process 0. The first device that fails aborts every other (no hang) and the run rejects naming
 * its global rank — except under a strategy that survives lost devices (async, asynchronous EASGD),
 * which goes on without it (lostDevices.ts).
 */
export async function runWorkerDevices(o: WorkerDevicesOptions): Promise<void> {
  const { config, shape, placement } = o;
  const { threads } = shape;
  const firstRank = firstDeviceOf(shape);
  const world = createShmWorld(threads, { stallMs: config.train.stallWarningSeconds * 1000 });
  const spec = config.train.strategy;
  const remotePs = placement !== undefined && needsParameterServer(spec);
  // async and asynchronous EASGD go on without a dead device; their devices need no world across processes
  const survives = survivesLostDevices(spec);
  const job = { ...shape, strategy: spec.type === 'easgd' ? 'asynchronous EASGD' : spec.type };
  let failure: Error | null = null;
  // a callback of the user's that throws (train's sink rethrows it) stops every device; train reports its error
  const emit: EventSink = (event) => {
    try {
      o.emit(event);
    } catch (err) {
      if (failure) return;
      failure = err instanceof Error ? err : new Error(String(err));
      world.abort(`the run was stopped: an event callback threw: ${failure.message}`);
    }
  };
  const lost = new LostDevices(job, emit, o.log);
  // every device starts identical (seeded init); the parameter server starts from the same weights
  let ps: DeviceWorkerInit['ps'] = null;
  let serving: Promise<unknown> | null = null;
  if (needsParameterServer(spec)) {
    const model = buildModel(jsBackend, config.model);
    model.initialize(config.train.seed);
    // frozen layers (train.initFrom.freeze): the server's optimizer leaves them alone too
    const start = {
      ...serverStart(o.checkpoints, model, config.optimizer),
      frozen: frozenRanges(config, model.paramEntries),
    };
    if (!remotePs) ps = allocateParameterServer(model.params.length, config.optimizer, start, shape.devices);
    else if (placement.process === 0) {
      serving = hostParameterServer(
        config,
        start,
        parameterServerWorldOf(placement, shape, 0, survives),
        (device, step, reason) => lost.report(device, step, lostLinkReason(device, job, reason)),
      ).then((work) => {
        if (work.pushes) emit({ type: 'serverWork', ...work });
      });
    }
  }
  const train = shareDataset(o.train);
  const test = o.test && shareDataset(o.test);
  const validation = o.validation ? shareDataset(o.validation) : null;
  if (threads > availableParallelism()) {
    o.log?.(
      `note: ${threads} devices on ${availableParallelism()} cores share the cores; expect no speed-up beyond ${availableParallelism()}`,
    );
  }
  const losses = threadLosses({
    lost,
    job,
    log: o.log,
    serverReports: remotePs && placement.process === 0,
    release: (device) => {
      if (ps) markDeviceDone(ps, device);
    },
  });
  const fail = (rank: number, message: string) => {
    if (failure || (survives && losses.absorb(rank, message))) return;
    failure = new Error(message.startsWith('device ') ? message : `${deviceName(rank, job)} failed: ${message}`);
    world.abort(failure.message);
    // devices held for early stopping's verdict are in no collective: the gate lets them go
    if (o.stopGate) abortStopGate(o.stopGate);
  };
  const serverDone = serving?.catch((err: Error) => fail(0, `the parameter server failed: ${err.message}`));
  const finished = Array.from(
    { length: threads },
    (_, local) =>
      new Promise<void>((resolve) => {
        const rank = firstRank + local;
        const init: DeviceWorkerInit = {
          config,
          rank,
          size: shape.devices,
          comm: world.rankInit(local),
          ps,
          cross:
            placement && placement.processes > 1 && !(survives && placement.transport === 'tcp')
              ? crossWorldOf(placement, local)
              : null,
          remotePs: remotePs ? parameterServerWorldOf(placement!, shape, rank + 1, survives) : null,
          train,
          validation: rank === 0 ? validation : null,
          test: rank === 0 ? test : null,
          checkpointPath: rank === 0 ? o.checkpointPath : null,
          checkpoints: o.checkpoints,
          faults: o.faults.toData(),
          stop: o.stopGate ? { gate: o.stopGate, local } : null,
        };
        const worker = spawnModuleWorker(import.meta.url, './deviceWorker', init);
        worker.on('message', (m: DeviceWorkerMessage) => {
          if (m.kind === 'events') {
            for (const event of m.events) {
              if (event.type === 'step') losses.sawStep(rank, event.step);
              emit(event);
            }
          } else if (m.kind === 'waits') o.onGateWait?.(local, m.step);
          else if (m.kind === 'error') fail(rank, m.message);
        });
        worker.on('error', (err) => fail(rank, err.message));
        worker.on('exit', (code) => {
          if (code !== 0) fail(rank, `its thread exited with code ${code}`);
          resolve();
        });
      }),
  );
  await Promise.all(finished);
  await serverDone;
  if (failure) throw failure;
}
