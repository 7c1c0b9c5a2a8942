import { availableParallelism } from 'node:os';
import { shareDataset, type Dataset } from '../data/dataset.ts';
import { buildModel } from '../nn/model.ts';
import { jsBackend } from '../kernels/js/index.ts';
import { createShmWorld } from '../comm/shm/index.ts';
import { needsParameterServer } from '../parallel/createStrategy.ts';
import { allocateParameterServer } from '../parallel/sharedParameterServer.ts';
import type { DeviceWorkerInit, DeviceWorkerMessage } from './deviceWorker.ts';
import { spawnModuleWorker } from './spawnWorker.ts';
import type { EventSink } from './events.ts';
import type { RunConfig } from './runConfig.ts';

export interface WorkerDevicesOptions {
  config: RunConfig;
  train: Dataset;
  test: Dataset;
  checkpointPath: string;
  emit: EventSink;
  slowDevices?: Map<number, number>;
  failAt?: { rank: number; step: number };
  log?: (message: string) => void;
}

/**
 * Runs one device per worker thread over a shared-memory world and relays their events. The first
 * device that fails aborts every other (no hang) and the run rejects naming its rank.
 */
export async function runWorkerDevices(o: WorkerDevicesOptions): Promise<void> {
  const { config } = o;
  const size = config.train.devices;
  const world = createShmWorld(size);
  // every device starts identical (seeded init); the parameter server starts from the same weights
  let ps: DeviceWorkerInit['ps'] = null;
  if (needsParameterServer(config.train.strategy)) {
    const model = buildModel(jsBackend, config.model);
    model.initialize(config.train.seed);
    ps = allocateParameterServer(model.params.length, config.optimizer, model.params);
  }
  const train = shareDataset(o.train);
  const test = shareDataset(o.test);
  if (size > availableParallelism()) {
    o.log?.(`note: ${size} devices on ${availableParallelism()} cores share the cores; expect no speed-up beyond ${availableParallelism()}`);
  }
  let failure: Error | null = null;
  const fail = (rank: number, message: string) => {
    if (failure) return;
    failure = new Error(`device ${rank} failed: ${message}`);
    world.abort(`device ${rank} failed`);
  };
  const finished = Array.from({ length: size }, (_, rank) => new Promise<void>((resolve) => {
    const init: DeviceWorkerInit = {
      config, rank, size, comm: world.rankInit(rank), ps, train, test: rank === 0 ? test : null,
      checkpointPath: rank === 0 ? o.checkpointPath : null, slowdown: o.slowDevices?.get(rank) ?? 1,
      failAtStep: o.failAt?.rank === rank ? o.failAt.step : undefined,
    };
    const worker = spawnModuleWorker(import.meta.url, './deviceWorker', init);
    worker.on('message', (m: DeviceWorkerMessage) => {
      if (m.kind === 'event') o.emit(m.event);
      else if (m.kind === 'error') fail(rank, m.message);
    });
    worker.on('error', (err) => fail(rank, err.message));
    worker.on('exit', (code) => {
      if (code !== 0) fail(rank, `its thread exited with code ${code}`);
      resolve();
    });
  }));
  await Promise.all(finished);
  if (failure) throw failure;
}
