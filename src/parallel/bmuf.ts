import type { Communicator } from '../comm/communicator.ts';
import type { Strategy } from './strategy.ts';
import { registerAndBroadcast } from './replicaSync.ts';

export interface BmufOptions {
  period: number;
  /** η, 0 ≤ η < 1 */
  blockMomentum: number;
  /** ζ > 0 */
  blockLr: number;
  nesterov: boolean;
}

/**
 * Blockwise model-update filtering (Chen & Huo 2016). Devices train locally for `period` steps;
 * then, with θ the block model and w̄ the average of the replicas:
 *   Δ ← η·Δ + ζ·(w̄ − θ);  θ ← θ + Δ;
 * replicas restart from θ (classic) or from θ + η·Δ (Nesterov). η = 0, ζ = 1 is model averaging.
 */
export function bmufStrategy(comm: Communicator, o: BmufOptions): Strategy {
  let theta: Float32Array, delta: Float32Array;
  let steps = 0;
  const sync = async (replica: { params: Float32Array; state: Float32Array }) => {
    steps = 0;
    await comm.allreduce(replica.params, 'mean');
    await comm.allreduce(replica.state, 'mean');
    const p = replica.params, { blockMomentum: eta, blockLr: zeta, nesterov } = o;
    for (let i = 0; i < p.length; i++) {
      const d = eta * delta[i]! + zeta * (p[i]! - theta[i]!);
      delta[i] = d;
      theta[i] = theta[i]! + d;
      p[i] = nesterov ? theta[i]! + eta * d : theta[i]!;
    }
  };
  return {
    name: 'bmuf',
    async onStart(replica) {
      await registerAndBroadcast(comm, replica);
      theta = replica.params.slice();
      delta = new Float32Array(replica.params.length);
    },
    async afterStep(replica) {
      if (++steps === o.period) await sync(replica);
    },
    async onFinish(replica) {
      if (steps > 0) await sync(replica);
      replica.params.set(theta);
    },
    modelParams: async () => theta,
  };
}
