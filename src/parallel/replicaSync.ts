import type { Communicator } from '../comm/communicator.ts';
import type { ReplicaView } from './strategy.ts';

/**
 * Shared start-up for collective strategies: register the buffers collectives will run on (the
 * shared-memory transport reads peers' registered buffers directly) and make every replica start
 * from rank 0's weights and state.
 */
export async function registerAndBroadcast(
  comm: Communicator,
  replica: ReplicaView,
  extra: Float32Array[] = [],
): Promise<void> {
  for (const buf of [replica.params, replica.grads, replica.state, ...extra]) await comm.register?.(buf);
  await comm.broadcast(replica.params, 0);
  await comm.broadcast(replica.state, 0);
}

/** Scales `buf` by `factor` in place. */
export function scaleInPlace(buf: Float32Array, factor: number): void {
  for (let i = 0; i < buf.length; i++) buf[i] = buf[i]! * factor;
}

/**
 * One averaging round that tolerates devices running out of data: every rank contributes its
 * buffers weighted by `weight` (samples since its last round; 0 for a rank that has finished) and
 * says whether it will take part in later rounds. Returns how many ranks are still active, so
 * finished ranks can keep joining rounds (with weight 0) until none is.
 */
export async function weightedAverageRound(
  comm: Communicator,
  bufs: Float32Array[],
  weight: number,
  active: boolean,
  scratch: Float32Array,
): Promise<{ totalWeight: number; active: number }> {
  scratch[0] = weight;
  scratch[1] = active ? 1 : 0;
  await comm.allreduce(scratch.subarray(0, 2), 'sum');
  const totalWeight = scratch[0]!,
    stillActive = scratch[1]!;
  if (totalWeight > 0) {
    for (const buf of bufs) {
      scaleInPlace(buf, weight / totalWeight);
      await comm.allreduce(buf, 'sum');
    }
  }
  return { totalWeight, active: stillActive };
}
