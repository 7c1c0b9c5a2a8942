import type { Communicator } from '../../comm/communicator.ts';
import { counter, type Strategy } from '../strategy.ts';
import { registerAndBroadcast, weightedAverageRound } from '../replicaSync.ts';
import type { StrategyEntry } from './entry.ts';

/**
 * BSP model averaging (Kaldi's recipe): devices train locally; every `period` steps their weights
 * (and BatchNorm statistics) are averaged, weighted by the samples each processed since the last
 * average. A device that runs out of data contributes its last work once, then keeps joining the
 * others' rounds with weight 0 (so collectives stay matched) until every device has finished.
 */
export function bspStrategy(comm: Communicator, period: number): Strategy {
  let samples = 0,
    steps = 0;
  const scratch = new Float32Array(2);
  return {
    name: 'bsp',
    // skipping a step with a NaN/Inf gradient is agreed every step (runtime/device/badSteps.ts)
    agree: (values) => comm.allreduce(values, 'sum'),
    onStart: (replica) => registerAndBroadcast(comm, replica),
    async afterStep(replica, info) {
      samples += info.samples;
      if (++steps < period) return;
      await weightedAverageRound(comm, [replica.params, replica.state], samples, true, scratch);
      samples = 0;
      steps = 0;
    },
    async onFinish(replica) {
      let round = await weightedAverageRound(comm, [replica.params, replica.state], samples, false, scratch);
      samples = 0;
      steps = 0;
      while (round.active > 0)
        round = await weightedAverageRound(comm, [replica.params, replica.state], 0, false, scratch);
    },
    saveState: () => ({ tensors: {}, counters: { samples, steps } }),
    restoreState(state) {
      samples = counter(state, 'samples');
      steps = counter(state, 'steps');
    },
  };
}

export interface BspSpec {
  type: 'bsp';
  period: number;
}

export const bspEntry: StrategyEntry<BspSpec> = {
  name: 'bsp',
  schema: (f) =>
    f.options({ period: f.posInt().default(1) }).transform((o): BspSpec => ({ type: 'bsp', period: o.period })),
  needsParameterServer: () => false,
  lockstep: true,
  create: (spec, { comm }) => bspStrategy(comm, spec.period),
};
