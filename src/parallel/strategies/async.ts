import { serverWeights, type ParameterServer } from '../parameterServer/index.ts';
import { counter, restoreTensor, type ReplicaView, type Strategy } from '../strategy.ts';
import { requireParameterServer, type StrategyEntry } from './entry.ts';
import { allFinite } from '../nonFinite.ts';

export interface AsyncOptions {
  /** pull the server's weights every n_fetch steps */
  fetchEvery: number;
  /** push the gradient accumulated over n_push steps */
  pushEvery: number;
  /** drop gradients staler than this many server updates (none when undefined) */
  maxStaleness?: number;
}

/**
 * Downpour SGD (Dean et al. 2012): the parameter server applies each pushed gradient as it
 * arrives, with the optimizer living on the server. A device computes on its local copy of the
 * weights, refreshed every n_fetch steps, and pushes the mean gradient it accumulated over n_push
 * steps. Staleness = server version when the gradient arrives − version it was computed on. A
 * gradient over the staleness bound is dropped and the device refreshes its weights at once.
 */
export function asyncStrategy(ps: ParameterServer, o: AsyncOptions): Strategy {
  let version = 0,
    steps = 0,
    pending = 0,
    lastLr = 0;
  let accumulated: Float32Array;
  const push = async (replica: ReplicaView) => {
    if (pending > 1) for (let i = 0; i < accumulated.length; i++) accumulated[i] = accumulated[i]! / pending;
    // train.clipGradNorm clips the gradient pushed (the mean over pushEvery steps)
    await replica.clipGradients?.(accumulated);
    const r = await ps.push(accumulated, version, lastLr, o.maxStaleness);
    accumulated.fill(0);
    pending = 0;
    return r;
  };
  return {
    name: 'async',
    async onStart(replica) {
      accumulated = new Float32Array(replica.grads.length);
      version = await ps.pull(replica.params);
    },
    async beforeStep(replica, info) {
      ps.atStep?.(info.step);
      if (steps > 0 && steps % o.fetchEvery === 0) version = await ps.pull(replica.params);
    },
    async applyUpdate(replica, info) {
      steps++;
      if (info.samples === 0) return {};
      const g = replica.grads;
      // a NaN/Inf loss or gradient is neither accumulated nor pushed (the step is skipped)
      if (info.lossNonFinite || !allFinite(g)) return { skipped: true };
      lastLr = info.lr;
      for (let i = 0; i < g.length; i++) accumulated[i] = accumulated[i]! + g[i]!;
      if (++pending < o.pushEvery) return {};
      const r = await push(replica);
      if (!r.applied) version = await ps.pull(replica.params);
      return { staleness: r.staleness, dropped: r.applied ? 0 : 1 };
    },
    async onFinish(replica) {
      if (pending > 0) await push(replica);
      // every device's last push must be applied before anyone reads the final weights
      // (the server's finish, not a barrier: a device that died is not waited for)
      await ps.finish();
      await ps.pull(replica.params);
    },
    modelParams: serverWeights(ps),
    saveState: () => ({ tensors: { accumulated }, counters: { version, steps, pending, lastLr } }),
    restoreState(state) {
      restoreTensor(state, 'accumulated', accumulated);
      // the version stays the one onStart pulled: the resumed server counts its updates afresh
      steps = counter(state, 'steps');
      pending = counter(state, 'pending');
      lastLr = counter(state, 'lastLr');
    },
  };
}

export interface AsyncSpec extends AsyncOptions {
  type: 'async';
}

export const asyncEntry: StrategyEntry<AsyncSpec> = {
  name: 'async',
  schema: (f) =>
    f
      .options({
        fetchEvery: f.posInt().default(1),
        pushEvery: f.posInt().default(1),
        maxStaleness: f.nonNegInt().optional(),
      })
      .transform((o): AsyncSpec => {
        const s: AsyncSpec = { type: 'async', fetchEvery: o.fetchEvery, pushEvery: o.pushEvery };
        if (o.maxStaleness !== undefined) s.maxStaleness = o.maxStaleness;
        return s;
      }),
  needsParameterServer: () => true,
  lockstep: false,
  survivesLostDevices: () => true,
  create: (spec, ctx) => asyncStrategy(requireParameterServer(ctx, 'async'), spec),
};
