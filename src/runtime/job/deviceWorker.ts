import { hostBackend } from '../../kernels/hostBackend.ts';
import { parentPort, workerData } from 'node:worker_threads';
import { setStallSink } from '../../comm/stallInspector.ts';
import type { Dataset } from '../../data/dataset.ts';
import type { Communicator } from '../../comm/communicator.ts';
import { ShmCommunicator, waitUntil, type ShmRankInit } from '../../comm/shm/index.ts';
import { PeerFailedError } from '../../comm/errors.ts';
import { createStrategy } from '../../parallel/strategies/index.ts';
import { strategyCommunicator } from '../../parallel/pipeline/net.ts';
import type { ParameterServer } from '../../parallel/parameterServer/index.ts';
import { SharedParameterServer, type SharedParameterServerMemory } from '../../parallel/parameterServer/shared.ts';
import { runDevice } from './deviceRun.ts';
import { deviceBackend } from '../device/deviceBackend.ts';
import type { TrainEvent } from '../events/events.ts';
import { StepEventBatcher } from '../events/eventBatch.ts';
import type { CrossWorldSpec, TcpWorldSpec } from './processWorld.ts';
import type { ProcessLinks } from './processLinks.ts';
import type { RunConfig } from '../../config/runConfig.ts';
import { FaultPlan, type FaultPlanData } from '../faults/faultPlan.ts';
import type { CheckpointSetup } from '../checkpoint/checkpointSetup.ts';
import { StopGateDevice } from './stop/deviceSide.ts';
import type { StopGateMemory } from './stop/protocol.ts';
import { deviceName } from './deviceNames.ts';

/** What the main thread gives each device thread. */
export interface DeviceWorkerInit {
  config: RunConfig;
  /** this device's rank among the job's devices, and their number (JobShape.devices) */
  rank: number;
  size: number;
  /** this process's shared-memory world of device threads */
  comm: ShmRankInit;
  /** shared-memory parameter server (one process) */
  ps: SharedParameterServerMemory | null;
  /** the cross-process world of this thread index (several processes) */
  cross: CrossWorldSpec | null;
  /** the parameter server in process 0 (several processes) */
  remotePs: TcpWorldSpec | null;
  train: Dataset;
  /** device 0: the validation split it evaluates on after epochs (null: none, or another device) */
  validation: Dataset | null;
  test: Dataset | null;
  checkpointPath: string | null;
  checkpoints: CheckpointSetup;
  /** the job's injected faults (every device gets the whole plan and asks it with its rank) */
  faults: FaultPlanData;
  /** this process's stop gate and this thread's index in it (null: the run cannot be stopped) */
  stop: { gate: StopGateMemory; local: number } | null;
}

export type DeviceWorkerMessage =
  | { kind: 'events'; events: TrainEvent[] }
  /** the device waits at the stop gate before `step`, after every event it sent before (stop/holds.ts) */
  | { kind: 'waits'; step: number }
  | { kind: 'error'; message: string; stack?: string };

/**
 * The loop's check before each step: the job's abort first (a failed device, a diverged run), so a
 * device that never waits on the others (async) stops at its next step rather than at the end of
 * the run; then the stop gate, when the run has one.
 */
function startsUnlessAborted(
  local: ShmCommunicator,
  gate: ((step: number) => boolean | Promise<boolean>) | undefined,
): (step: number) => boolean | Promise<boolean> {
  const abort = local.abortSignal();
  return (step) => {
    abort.check();
    return gate ? gate(step) : true;
  };
}

const init = workerData as DeviceWorkerInit;
const post = (m: DeviceWorkerMessage) => parentPort!.postMessage(m);
const events = new StepEventBatcher((batch) => post({ kind: 'events', events: batch }));
/** the main thread hears of a wait at the stop gate after the events before it */
const waitsAtGate = (step: number) => {
  events.flush();
  post({ kind: 'waits', step });
};
// a job of several processes: its links (loaded only then, see processLinks.ts)
let links: ProcessLinks | null = null;

try {
  const { config, rank, size } = init;
  const local = await ShmCommunicator.connect(init.comm);
  const backend = await deviceBackend(config.train.backend, local);
  if (init.cross || init.remotePs) links = new (await import('./processLinks.ts')).ProcessLinks();
  const comm: Communicator = init.cross ? await links!.joinCross(init.cross, local) : local;
  let ps: ParameterServer | null = null;
  if (init.remotePs) {
    ps = await links!.remoteParameterServer(init.remotePs);
  } else if (init.ps) {
    ps = new SharedParameterServer(
      init.ps,
      rank,
      hostBackend(backend),
      config.optimizer,
      local.mutex(0),
      (control, word, ready, stall) =>
        waitUntil(control, word, ready, {
          abort: local.abortSignal(),
          ...(stall && config.train.stallWarningSeconds > 0
            ? { stall: { afterMs: config.train.stallWarningSeconds * 1000, warn: stall } }
            : {}),
        }),
    );
  }
  // a pipeline's stages reduce over the same stage of the other pipelines
  const strategyComm = strategyCommunicator(comm, config.train.pipeline?.stages);
  const strategy = createStrategy(config.train.strategy, { comm: strategyComm, ps, seed: config.train.seed });
  setStallSink((report) => events.emit({ type: 'stall', ...report }));
  await runDevice({
    config,
    rank,
    worldSize: size,
    backend,
    strategy,
    train: init.train,
    validation: init.validation,
    test: init.test,
    checkpointPath: init.checkpointPath,
    checkpoints: init.checkpoints,
    shared: true,
    comm,
    faults: FaultPlan.fromData(init.faults),
    emit: (event) => events.emit(event),
    mayStart: startsUnlessAborted(
      local,
      init.stop ? StopGateDevice.check(init.stop.gate, init.stop.local, false, waitsAtGate) : undefined,
    ),
    takeCommStats: () => {
      // collectives and the parameter server both count as communication
      const s = comm.takeStats(),
        p = ps?.takeStats() ?? { commMs: 0, idleMs: 0, bytes: 0 };
      return { commMs: s.commMs + p.commMs, idleMs: s.idleMs + p.idleMs, bytes: s.bytes + p.bytes };
    },
  });
  events.flush();
  await ps?.close?.();
  await links?.close();
} catch (err) {
  const e = err instanceof Error ? err : new Error(String(err));
  // a device that stopped because another failed passes on that device's reason, so every process
  // reports the root cause ("device 3 failed: …"), not the chain of devices that noticed it
  const name = deviceName(init.rank, { threads: init.comm.size, processes: init.size / init.comm.size });
  const cause =
    e instanceof PeerFailedError && e.reason.startsWith('device ') ? e.reason : `${name} failed: ${e.message}`;
  // tell the other processes at once rather than leaving them to time out
  links?.abort(cause);
  // the steps it finished reach the metrics before its error
  events.flush();
  post({ kind: 'error', message: cause, stack: e.stack });
}
