import type { Communicator } from '../../comm/communicator.ts';
import { counter, restoreTensor, type Strategy, type StrategyState } from '../strategy.ts';
import { registerAndBroadcast } from '../replicaSync.ts';
import type { CompressedDeltas } from '../compression/compressedDeltas.ts';

/**
 * What a periodic-averaging strategy does at each synchronisation (BMUF's block filter, DiLoCo's
 * outer optimizer). It owns its buffers; the skeleton owns the start point and the step counter.
 */
export interface OuterUpdate {
  /** Once the replicas hold their common start s (after the broadcast, before any step): size the buffers on it. */
  begin(start: Float32Array): void;
  /**
   * s ← the new start, in place, from the old s and the replicas' mean w̄ (`mean`, which the rule
   * may overwrite: the replicas are reset to s right after).
   */
  apply(start: Float32Array, mean: Float32Array): void;
  /** The weights that represent the job (evaluation, checkpoints, the end of the run), given s. */
  model(start: Float32Array): Float32Array;
  /** The rule's buffers and counters for checkpoint sets (the skeleton adds `start` and `steps`). */
  save(): StrategyState;
  /** On resume, after begin: the rule's part of what save returned. */
  restore(state: StrategyState): void;
}

/**
 * Periodic averaging with an outer update, the skeleton BMUF and DiLoCo share: devices train
 * locally with the config's optimizer from a common start s; every `period` local steps the
 * replicas' weights and BatchNorm statistics are all-reduced to their mean w̄ (the statistics stay
 * that mean), `rule` maps (s, w̄) to the new s, and every replica restarts from it. A last partial
 * period is closed in onFinish, which leaves the replicas on the job's model. A step with a NaN/Inf
 * loss or gradient is skipped on every device alike (`agree`, runtime/device/badSteps.ts).
 * With `deltas` (the strategy's `compression`), w̄ is s + the compressed estimate of the mean of
 * the replicas' deltas w − s (compression/compressedDeltas.ts).
 */
export function periodicAveragingStrategy(
  name: string,
  comm: Communicator,
  period: number,
  rule: OuterUpdate,
  deltas?: CompressedDeltas,
): Strategy {
  let start: Float32Array;
  let steps = 0;
  /** the last step taken, the same on every device (they step together): whether a sync is compressed */
  let lastStep = -1;
  const sync = async (replica: { params: Float32Array; state: Float32Array }) => {
    steps = 0;
    const compressed = deltas?.compressesAt(lastStep) && (await deltas.average(replica.params, start, 1));
    if (!compressed) await comm.allreduce(replica.params, 'mean');
    await comm.allreduce(replica.state, 'mean');
    rule.apply(start, replica.params);
    replica.params.set(start);
  };
  return {
    name,
    agree: (values) => comm.allreduce(values, 'sum'),
    async onStart(replica) {
      await registerAndBroadcast(comm, replica);
      start = replica.params.slice();
      rule.begin(start);
      await deltas?.begin(replica);
    },
    async afterStep(replica, info) {
      lastStep = info.step;
      if (++steps === period) await sync(replica);
    },
    async onFinish(replica) {
      if (steps > 0) await sync(replica);
      replica.params.set(rule.model(start));
    },
    modelParams: async () => rule.model(start),
    saveState() {
      const own = rule.save(),
        sent = deltas?.save() ?? { tensors: {}, counters: {} };
      return {
        tensors: { start, ...own.tensors, ...sent.tensors },
        counters: { steps, ...own.counters, ...sent.counters },
      };
    },
    restoreState(state) {
      restoreTensor(state, 'start', start);
      rule.restore(state);
      deltas?.restore(state);
      steps = counter(state, 'steps');
    },
  };
}
