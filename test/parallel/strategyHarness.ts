import type { ReplicaView, StepInfo } from '../../src/parallel/strategy.ts';
import type { ParameterServer } from '../../src/parallel/parameterServer/index.ts';
import { SharedParameterServer, allocateParameterServer } from '../../src/parallel/parameterServer/shared.ts';
import { jsBackend } from '../../src/kernels/js/index.ts';
import type { OptimizerSpec } from '../../src/optim/spec.ts';

/**
 * Tiny in-process replicas and a parameter server for driving a strategy's hooks by hand (with
 * localGroup's communicators), so each strategy's maths can be checked against a hand computation.
 */

export type TestReplica = ReplicaView & {
  params: Float32Array;
  grads: Float32Array;
  state: Float32Array;
  localSteps: number;
};

/** A replica whose local step is plain SGD on whatever is in `grads`: params −= lr·grads. */
export function sgdReplica(params: number[], state: number[] = [0]): TestReplica {
  const r: TestReplica = {
    params: Float32Array.from(params),
    grads: new Float32Array(params.length),
    state: Float32Array.from(state),
    localSteps: 0,
    localStep(lr) {
      for (let i = 0; i < r.params.length; i++) r.params[i] = r.params[i]! - lr * r.grads[i]!;
      r.localSteps++;
    },
  };
  return r;
}

/** A replica whose local step adds `rate` to every weight, so averages are easy to predict. */
export function driftReplica(rate: number, params: number[], state: number[] = [0]): TestReplica {
  const r: TestReplica = {
    params: Float32Array.from(params),
    grads: new Float32Array(params.length),
    state: Float32Array.from(state),
    localSteps: 0,
    localStep() {
      for (let i = 0; i < r.params.length; i++) r.params[i] = r.params[i]! + rate;
      r.localSteps++;
    },
  };
  return r;
}

export const stepInfo = (step: number, lr = 0, samples = 1): StepInfo => ({ step, epoch: 0, lr, samples });

/** Plain SGD (w −= lr·g) on the server. */
export const SGD: OptimizerSpec = { type: 'sgd', lr: 1, momentum: 0, nesterov: false, weightDecay: 0 };

export interface PushRecord {
  grads: number[];
  computedAt: number;
  lr: number;
  staleness: number;
  applied: boolean;
}

/**
 * The shared-memory parameter server (its real pull/push/elastic maths and optimizer) for devices in
 * ONE thread: the lock is free, and turns are handed over with promises instead of Atomics.wait.
 * Records every push and the order of turns.
 */
export function localParameterServer(
  initial: number[],
  spec: OptimizerSpec = SGD,
  devices = 2,
): ParameterServer & {
  weights: Float32Array;
  pushes: PushRecord[];
  turns: number[];
  exchanges: number;
} {
  const memory = allocateParameterServer(initial.length, spec, Float32Array.from(initial), devices);
  const noLock = { lock: () => 0, unlock: () => {} };
  const inner = new SharedParameterServer(memory, 0, jsBackend, spec, noLock, () => {
    throw new Error('turns are taken with promises here');
  });
  let turn = 0,
    finished = 0;
  const finishWaiters: (() => void)[] = [];
  let waiting: { rank: number; size: number; resolve: () => void }[] = [];
  const wake = () => {
    const ready = waiting.filter((w) => turn % w.size === w.rank);
    waiting = waiting.filter((w) => !ready.includes(w));
    for (const w of ready) w.resolve();
  };
  const ps = {
    weights: new Float32Array(memory.params),
    pushes: [] as PushRecord[],
    turns: [] as number[],
    exchanges: 0,
    pull: (into: Float32Array) => inner.pull(into),
    async push(grads: Float32Array, computedAt: number, lr: number, maxStaleness?: number) {
      const r = await inner.push(grads, computedAt, lr, maxStaleness);
      ps.pushes.push({ grads: [...grads], computedAt, lr, ...r });
      return r;
    },
    async elasticExchange(x: Float32Array, alpha: number) {
      ps.exchanges++;
      await inner.elasticExchange(x, alpha);
    },
    waitTurn: (rank: number, size: number) =>
      new Promise<void>((resolve) => {
        waiting.push({
          rank,
          size,
          resolve: () => {
            ps.turns.push(rank);
            resolve();
          },
        });
        wake();
      }),
    async passTurn() {
      turn++;
      wake();
    },
    // every device's finish() resolves once all `devices` have called it (a barrier, with promises)
    finish: () =>
      new Promise<void>((resolve) => {
        finishWaiters.push(resolve);
        if (++finished >= devices) for (const w of finishWaiters.splice(0)) w();
      }),
    takeStats: () => inner.takeStats(),
    snapshot: () => inner.snapshot(),
  };
  return ps;
}
