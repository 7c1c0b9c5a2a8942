/**
 * Hybrid's steps on a small dense model, for the overlap tests of the transports whose calls
 * progress in the background (tcp-overlap.test.ts, mpi-overlap.test.ts): a model, a device view of
 * it, one step (forward, backward with the strategy's buckets, the update), and a communicator
 * with its background progress hidden (hybrid then reduces as over a blocking transport).
 */
import type { Communicator } from '../../src/comm/communicator.ts';
import type { ReplicaView, Strategy } from '../../src/parallel/strategy.ts';
import { jsBackend } from '../../src/kernels/js/index.ts';
import { buildModel, type Sequential } from '../../src/nn/model.ts';
import type { LayerSpec } from '../../src/nn/spec.ts';
import { Tensor } from '../../src/tensor/tensor.ts';
import { randomArray } from '../util/close.ts';

export const BATCH = 4,
  WIDTH = 24,
  LAYERS = 12;

/** The same communicator with its background progress hidden: hybrid then reduces as over a blocking transport. */
export function withoutOverlap(comm: Communicator): Communicator {
  return new Proxy(comm, {
    get: (target, key, receiver) => (key === 'progressesInBackground' ? undefined : Reflect.get(target, key, receiver)),
  });
}

const dense = (units: number): LayerSpec => ({
  type: 'dense',
  units,
  activation: 'tanh',
  useBias: true,
  parallel: 'data',
});

export function model(layers = LAYERS): Sequential {
  const m = buildModel(jsBackend, { input: [WIDTH], layers: Array.from({ length: layers }, () => dense(WIDTH)) });
  m.initialize(3);
  return m;
}

/** A device: its model, plain SGD on the reduced gradient as its local step. */
export function device(m: Sequential): ReplicaView {
  return {
    params: m.params,
    grads: m.grads,
    state: m.state,
    localStep(lr) {
      for (let i = 0; i < m.params.length; i++) m.params[i] = m.params[i]! - lr * m.grads[i]!;
    },
  };
}

/** One step of a device: forward, backward with the strategy's buckets, the update. */
export async function step(
  m: Sequential,
  s: Strategy,
  rank: number,
  k: number,
  onReady?: (offset: number) => void,
): Promise<void> {
  m.zeroGrads();
  const x = new Tensor([BATCH, WIDTH], randomArray(BATCH * WIDTH, 100 + 10 * k + rank));
  const y = m.forward(x, { training: true, seed: 1, step: k, sampleOffset: rank * BATCH });
  const dy = new Tensor(y.shape, randomArray(y.size, 900 + 10 * k + rank));
  const view = device(m);
  await m.backwardAsync(dy, (offset) => {
    onReady?.(offset);
    return s.onGradientsReady!(view, offset);
  });
  await s.applyUpdate!(view, { step: k, epoch: 0, lr: 0.1, samples: BATCH });
}

/** A device without samples: announces every gradient offset at once, then updates (as a peer that is ahead). */
export async function announceAll(m: Sequential, s: Strategy): Promise<void> {
  const view = device(m);
  for (const offset of m.gradientReadyOffsets) void s.onGradientsReady!(view, offset);
  await s.applyUpdate!(view, { step: 0, epoch: 0, lr: 0.1, samples: 0 });
}
