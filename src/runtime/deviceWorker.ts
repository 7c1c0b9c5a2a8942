import { parentPort, workerData } from 'node:worker_threads';
import { getBackend } from '../kernels/index.ts';
import type { Dataset } from '../data/dataset.ts';
import { ShmCommunicator, waitUntil, type ShmRankInit } from '../comm/shm/index.ts';
import { createStrategy } from '../parallel/createStrategy.ts';
import { SharedParameterServer, type SharedParameterServerMemory } from '../parallel/sharedParameterServer.ts';
import { runDevice } from './device.ts';
import type { TrainEvent } from './events.ts';
import type { RunConfig } from './runConfig.ts';

/** What the main thread gives each device thread. */
export interface DeviceWorkerInit {
  config: RunConfig;
  rank: number;
  size: number;
  comm: ShmRankInit;
  ps: SharedParameterServerMemory | null;
  train: Dataset;
  test: Dataset | null;
  checkpointPath: string | null;
  slowdown: number;
  failAtStep?: number;
}

export type DeviceWorkerMessage =
  | { kind: 'event'; event: TrainEvent }
  | { kind: 'error'; message: string; stack?: string };

const init = workerData as DeviceWorkerInit;
const post = (m: DeviceWorkerMessage) => parentPort!.postMessage(m);

try {
  const { config, rank, size } = init;
  const backend = await getBackend(config.train.backend);
  const comm = await ShmCommunicator.connect(init.comm);
  const ps = init.ps
    ? new SharedParameterServer(init.ps, backend, config.optimizer, comm.mutex(0),
        (control, word, ready) => waitUntil(control, word, ready, comm.abortSignal()))
    : null;
  const strategy = createStrategy(config.train.strategy, { comm, ps });
  await runDevice({
    config, rank, worldSize: size, backend, strategy, train: init.train, test: init.test,
    checkpointPath: init.checkpointPath, shared: true, slowdown: init.slowdown, failAtStep: init.failAtStep, comm,
    emit: (event) => post({ kind: 'event', event }),
    takeCommStats: () => {
      // collectives and the parameter server both count as communication
      const s = comm.takeStats(), p = ps?.takeStats() ?? { commMs: 0, waitMs: 0, bytes: 0 };
      return { commMs: s.commMs + p.commMs, idleMs: s.waitMs + p.waitMs, bytes: s.bytes + p.bytes };
    },
  });
} catch (err) {
  const e = err instanceof Error ? err : new Error(String(err));
  post({ kind: 'error', message: e.message, stack: e.stack });
}
