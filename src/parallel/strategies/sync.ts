import type { Communicator } from '../../comm/communicator.ts';
import { serverWeights, type ParameterServer } from '../parameterServer/index.ts';
import type { Strategy } from '../strategy.ts';
import { requireParameterServer, type StrategyEntry } from './entry.ts';
import { allFinite } from '../nonFinite.ts';

/**
 * Synchronous baseline: one device at a time takes the shared weights, processes its batch and
 * applies its update while the others wait — sequential SGD spread over devices, with no speed-up
 * by construction (the reference the other strategies are measured against).
 */
export function syncStrategy(ps: ParameterServer, comm: Communicator): Strategy {
  const { rank, size } = comm;
  let version = 0;
  return {
    name: 'sync',
    async beforeStep(replica) {
      await ps.waitTurn(rank, size);
      version = await ps.pull(replica.params);
    },
    async applyUpdate(replica, info) {
      // an empty slice (short last batch) has nothing to apply: Adam would still move the weights;
      // a NaN/Inf loss or gradient is never pushed (the step is skipped)
      const skipped = info.samples > 0 && (info.lossNonFinite === true || !allFinite(replica.grads));
      // train.clipGradNorm clips the gradient pushed
      if (info.samples > 0 && !skipped) await replica.clipGradients?.(replica.grads);
      const r = info.samples > 0 && !skipped ? await ps.push(replica.grads, version, info.lr) : { staleness: 0 };
      await ps.passTurn();
      return skipped ? { staleness: r.staleness, skipped } : { staleness: r.staleness };
    },
    async onFinish(replica) {
      // every device's last update must be on the server before anyone reads the final weights
      await comm.barrier();
      await ps.pull(replica.params);
    },
    modelParams: serverWeights(ps),
  };
}

export interface SyncSpec {
  type: 'sync';
}

export const syncEntry: StrategyEntry<SyncSpec> = {
  name: 'sync',
  schema: (f) => f.options({}, 'sync').transform((): SyncSpec => ({ type: 'sync' })),
  needsParameterServer: () => true,
  // one device at a time, in turn
  lockstep: false,
  create: (_spec, ctx) => syncStrategy(requireParameterServer(ctx, 'sync'), ctx.comm),
};
