import type { Communicator } from '../comm/communicator.ts';
import type { Strategy } from './strategy.ts';
import { registerAndBroadcast } from './replicaSync.ts';

/**
 * Hybrid (synchronous data parallelism): every device computes a gradient on its own slice of the
 * global batch, the mean of all is applied by every replica's identical optimizer — exactly one
 * device with the global batch, up to floating-point summation order.
 */
export function hybridStrategy(comm: Communicator): Strategy {
  return {
    name: 'hybrid',
    onStart: (replica) => registerAndBroadcast(comm, replica),
    async applyUpdate(replica, info) {
      // each rank's gradient is already scaled by worldSize/globalBatch, so the mean is the global mean
      await comm.allreduce(replica.grads, 'mean');
      replica.localStep(info.lr);
    },
  };
}
