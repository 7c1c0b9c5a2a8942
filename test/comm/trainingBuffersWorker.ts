/**
 * One device thread of shm-training-buffers.test.ts: the backend a device thread builds
 * (runtime/device/deviceBackend.ts), a real replica, the hybrid strategy's start and one step on it;
 * posts which paths the collectives took and the reduced gradient.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { ShmCommunicator, type ShmInit } from '../../src/comm/shm/index.ts';
import { deviceBackend } from '../../src/runtime/device/deviceBackend.ts';
import { Replica } from '../../src/runtime/device/replica.ts';
import { createStrategy } from '../../src/parallel/strategies/index.ts';
import type { RunConfig } from '../../src/config/runConfig.ts';
import type { Sequential } from '../../src/nn/model.ts';

const { init, config, backendName } = workerData as { init: ShmInit; config: RunConfig; backendName: string };
const comm = await ShmCommunicator.connect(init);
const backend = await deviceBackend(backendName, comm);
const replica = Replica.create(backend, config, { shared: true, comm }) as unknown as Replica<Sequential>;
const view = replica.view();
const strategy = createStrategy(config.train.strategy, { comm, ps: null });
await strategy.onStart?.(view);
const afterStart = comm.pathCounts();

// one step on a different batch per rank (kernels computing in the arena), then the update
const per = 28 * 28,
  n = 4;
const images = new Float32Array(n * per).map((_, i) => Math.sin(i * 0.37 + comm.rank));
const labels = Int32Array.from({ length: n }, (_, i) => (i + comm.rank * 3) % 10);
replica.zeroGrads();
replica.computeGradients(
  images,
  labels,
  { training: true, seed: 1, step: 0, sampleOffset: comm.rank * n },
  1 / (2 * n),
);
const ownGrads = Float32Array.from(view.grads);
await strategy.applyUpdate?.(view, { step: 0, epoch: 0, lr: 0.01, samples: n });
parentPort!.postMessage({
  inArena: { params: comm.inArena(view.params), grads: comm.inArena(view.grads), state: comm.inArena(view.state) },
  afterStart,
  afterStep: comm.pathCounts(),
  ownGrads,
  reduced: Float32Array.from(view.grads),
  params: Float32Array.from(view.params),
});
comm.close();
