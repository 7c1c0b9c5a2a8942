import type { Communicator } from '../../comm/communicator.ts';
import { serverWeights, type ParameterServer } from '../parameterServer/index.ts';
import { counter, restoreTensor, type Strategy } from '../strategy.ts';
import { registerAndBroadcast } from '../replicaSync.ts';
import { requireParameterServer, type StrategyEntry } from './entry.ts';

/**
 * Elastic averaging SGD (Zhang, Choromanska & LeCun 2015): replicas train locally and every
 * `period` steps are pulled towards a centre variable x̃ that is pulled towards them, with moving
 * rate α.
 *
 * Synchronous: every replica keeps an identical copy of x̃; with x̄ the mean of the replicas,
 *   x_i ← x_i − α(x_i − x̃),   x̃ ← x̃ + α·G·(x̄ − x̃)     (stable for α·G < 1).
 */
export function easgdSyncStrategy(comm: Communicator, alpha: number, period: number): Strategy {
  let centre: Float32Array, mean: Float32Array;
  let steps = 0;
  return {
    name: 'easgd',
    // skipping a step with a NaN/Inf gradient is agreed every step (runtime/device/badSteps.ts)
    agree: (values) => comm.allreduce(values, 'sum'),
    async onStart(replica) {
      mean = new Float32Array(new SharedArrayBuffer(replica.params.byteLength));
      await registerAndBroadcast(comm, replica, [mean]);
      centre = replica.params.slice();
    },
    async afterStep(replica) {
      if (++steps < period) return;
      steps = 0;
      mean.set(replica.params);
      await comm.allreduce(mean, 'mean');
      const x = replica.params,
        g = comm.size;
      for (let i = 0; i < x.length; i++) {
        const c = centre[i]!;
        x[i] = x[i]! - alpha * (x[i]! - c);
        centre[i] = c + alpha * g * (mean[i]! - c);
      }
      await comm.allreduce(replica.state, 'mean');
    },
    modelParams: async () => centre,
    saveState: () => ({ tensors: { centre }, counters: { steps } }),
    restoreState(state) {
      restoreTensor(state, 'centre', centre);
      steps = counter(state, 'steps');
    },
  };
}

/**
 * Asynchronous EASGD: the centre lives on the parameter server; every `period` steps a replica
 * makes the elastic exchange with it on its own, atomically: d = α(x − x̃); x̃ += d; x −= d.
 */
export function easgdAsyncStrategy(ps: ParameterServer, alpha: number, period: number): Strategy {
  let steps = 0;
  return {
    name: 'easgd',
    async onStart(replica) {
      // start from the server's centre so every replica begins at the same point
      await ps.pull(replica.params);
    },
    async beforeStep(_replica, info) {
      ps.atStep?.(info.step);
    },
    async afterStep(replica) {
      if (++steps < period) return;
      steps = 0;
      await ps.elasticExchange(replica.params, alpha);
    },
    async onFinish() {
      // the centre is final once every device alive has made its last exchange
      await ps.finish();
    },
    modelParams: serverWeights(ps),
    saveState: () => ({ tensors: {}, counters: { steps } }),
    restoreState(state) {
      steps = counter(state, 'steps');
    },
  };
}

export interface EasgdSpec {
  type: 'easgd';
  alpha: number;
  period: number;
  mode: 'sync' | 'async';
}

export const easgdEntry: StrategyEntry<EasgdSpec> = {
  name: 'easgd',
  schema: (f) =>
    f
      .options({
        alpha: f.openUnit().default(0.1),
        period: f.posInt().default(1),
        mode: f.oneOf(['sync', 'async'] as const).default('sync'),
      })
      .transform((o): EasgdSpec => ({ type: 'easgd', alpha: o.alpha, period: o.period, mode: o.mode })),
  // asynchronous: the centre lives on the server
  needsParameterServer: (spec) => spec.mode === 'async',
  lockstep: { when: 'mode: sync', test: (spec) => spec.mode === 'sync' },
  survivesLostDevices: (spec) => spec.mode === 'async',
  check(spec, devices) {
    if (spec.mode === 'sync' && spec.alpha * devices >= 1) {
      throw new Error(
        `train.strategy.easgd.alpha: synchronous EASGD needs alpha·devices < 1 (the centre's moving rate), ` +
          `got ${spec.alpha}·${devices} = ${+(spec.alpha * devices).toFixed(4)}; use alpha < ${+(1 / devices).toFixed(4)}`,
      );
    }
  },
  create: (spec, ctx) =>
    spec.mode === 'sync'
      ? easgdSyncStrategy(ctx.comm, spec.alpha, spec.period)
      : easgdAsyncStrategy(requireParameterServer(ctx, 'easgd'), spec.alpha, spec.period),
};
