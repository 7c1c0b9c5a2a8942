import type { Communicator } from '../../comm/communicator.ts';
import { counter, restoreTensor, type ReplicaView, type Strategy } from '../strategy.ts';
import { registerAndBroadcast, scaleInPlace, weightedAverageRound } from '../replicaSync.ts';
import type { StrategyEntry } from './entry.ts';
import { CompressedDeltas } from '../compression/compressedDeltas.ts';
import { compressionSchema, type CompressionSpec } from '../compression/spec.ts';

/**
 * BSP model averaging (Kaldi's recipe): devices train locally; every `period` steps their weights
 * (and BatchNorm statistics) are averaged, weighted by the samples each processed since the last
 * average. A device that runs out of data contributes its last work once, then keeps joining the
 * others' rounds with weight 0 (so collectives stay matched) until every device has finished.
 * With `deltas` (`compression`) the weights' average is the last one plus the compressed estimate
 * of the weighted mean of the deltas from it (compressedBspRound).
 */
export function bspStrategy(comm: Communicator, period: number, deltas?: CompressedDeltas): Strategy {
  let samples = 0,
    steps = 0,
    lastStep = -1;
  const scratch = new Float32Array(3);
  /** with compression: the last average, where every replica started its block */
  let start = new Float32Array(0);
  let weights: Float32Array = start;
  const round = (replica: ReplicaView, weight: number, active: boolean) =>
    deltas
      ? compressedBspRound(comm, deltas, replica, start, { weight, active, step: lastStep }, scratch)
      : weightedAverageRound(comm, [replica.params, replica.state], weight, active, scratch);
  return {
    name: 'bsp',
    // skipping a step with a NaN/Inf gradient is agreed every step (runtime/device/badSteps.ts)
    agree: (values) => comm.allreduce(values, 'sum'),
    async onStart(replica) {
      await registerAndBroadcast(comm, replica);
      if (!deltas) return;
      weights = replica.params;
      start = weights.slice();
      await deltas.begin(replica);
    },
    async afterStep(replica, info) {
      samples += info.samples;
      lastStep = info.step;
      if (++steps < period) return;
      await round(replica, samples, true);
      samples = 0;
      steps = 0;
    },
    async onFinish(replica) {
      let r = await round(replica, samples, false);
      samples = 0;
      steps = 0;
      while (r.active > 0) r = await round(replica, 0, false);
    },
    saveState() {
      const counters = { samples, steps };
      if (!deltas) return { tensors: {}, counters };
      const sent = deltas.save();
      return { tensors: { start, ...sent.tensors }, counters: { ...counters, ...sent.counters } };
    },
    restoreState(state) {
      samples = counter(state, 'samples');
      steps = counter(state, 'steps');
      if (!deltas) return;
      deltas.restore(state);
      if (state.tensors.start) return restoreTensor(state, 'start', start);
      // a set of bsp without compression: at an average every replica holds it (the device's own weights, restored)
      if (steps > 0)
        throw new Error(
          `checkpoint: the set was written by bsp without compression ${steps} steps after an average, which it does not hold ` +
            'for the deltas to start from; resume without train.strategy.bsp.compression, or from a set written at an ' +
            'average (train.checkpointEvery a multiple of bsp.period)',
        );
      start.set(weights);
    },
  };
}

/**
 * weightedAverageRound with the weights' part compressed: every device says its weight, whether it
 * goes on, and whether its last step has reached compression's start (any device's has: the round
 * is compressed); each sends G·weight/Σweight times its delta from `start`, the statistics travel
 * plain; `start` becomes the new average. Finished devices send weight 0 (and their error feedback).
 */
async function compressedBspRound(
  comm: Communicator,
  deltas: CompressedDeltas,
  replica: ReplicaView,
  start: Float32Array,
  me: { weight: number; active: boolean; step: number },
  scratch: Float32Array,
): Promise<{ totalWeight: number; active: number }> {
  scratch[0] = me.weight;
  scratch[1] = me.active ? 1 : 0;
  scratch[2] = deltas.compressesAt(me.step) ? 1 : 0;
  await comm.allreduce(scratch, 'sum');
  const totalWeight = scratch[0]!,
    active = scratch[1]!;
  if (totalWeight > 0) {
    const share = me.weight / totalWeight;
    scaleInPlace(replica.state, share);
    await comm.allreduce(replica.state, 'sum');
    const compressed = scratch[2]! > 0 && (await deltas.average(replica.params, start, comm.size * share));
    if (!compressed) {
      scaleInPlace(replica.params, share);
      await comm.allreduce(replica.params, 'sum');
    }
    start.set(replica.params);
  }
  return { totalWeight, active };
}

export interface BspSpec {
  type: 'bsp';
  period: number;
  /** the model deltas sent compressed, with error feedback (compression/compressedDeltas.ts); absent: plain floats */
  compression?: CompressionSpec;
}

export const bspEntry: StrategyEntry<BspSpec> = {
  name: 'bsp',
  schema: (f) =>
    f
      .options({ period: f.posInt().default(1), compression: compressionSchema(f).optional() })
      .transform(
        (o): BspSpec => ({ type: 'bsp', period: o.period, ...(o.compression ? { compression: o.compression } : {}) }),
      ),
  needsParameterServer: () => false,
  lockstep: true,
  create: (spec, { comm, seed }) =>
    bspStrategy(comm, spec.period, spec.compression && new CompressedDeltas(comm, spec.compression, seed ?? 0)),
};
