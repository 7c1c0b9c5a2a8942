import type { Communicator } from '../../comm/communicator.ts';
import { counter, restoreTensor, type Strategy } from '../strategy.ts';
import { registerAndBroadcast } from '../replicaSync.ts';
import type { StrategyEntry } from './entry.ts';

export interface BmufOptions {
  period: number;
  /** η, 0 ≤ η < 1 */
  blockMomentum: number;
  /** ζ > 0 */
  blockLr: number;
  nesterov: boolean;
}

/**
 * Blockwise model-update filtering (Chen & Huo 2016). Devices train locally for `period` steps
 * from a common start point s; then, with w̄ the average of the replicas:
 *   Δ ← η·Δ + ζ·(w̄ − s);  θ ← s + Δ  (the block model);
 *   s ← θ + η·Δ (Nesterov: look ahead) or s ← θ (classic); replicas restart from s.
 * The block gradient is measured from where the replicas started (as fairseq's BMUF does), so
 * with Nesterov the look-ahead is not counted twice. η = 0, ζ = 1 is plain model averaging.
 */
export function bmufStrategy(comm: Communicator, o: BmufOptions): Strategy {
  let start: Float32Array, theta: Float32Array, delta: Float32Array;
  let steps = 0;
  const sync = async (replica: { params: Float32Array; state: Float32Array }) => {
    steps = 0;
    await comm.allreduce(replica.params, 'mean');
    await comm.allreduce(replica.state, 'mean');
    const p = replica.params,
      { blockMomentum: eta, blockLr: zeta, nesterov } = o;
    for (let i = 0; i < p.length; i++) {
      const d = eta * delta[i]! + zeta * (p[i]! - start[i]!);
      delta[i] = d;
      const t = start[i]! + d;
      theta[i] = t;
      const s = nesterov ? t + eta * d : t;
      start[i] = s;
      p[i] = s;
    }
  };
  return {
    name: 'bmuf',
    async onStart(replica) {
      await registerAndBroadcast(comm, replica);
      start = replica.params.slice();
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
    saveState: () => ({ tensors: { start, theta, delta }, counters: { steps } }),
    restoreState(state) {
      restoreTensor(state, 'start', start);
      restoreTensor(state, 'theta', theta);
      restoreTensor(state, 'delta', delta);
      steps = counter(state, 'steps');
    },
  };
}

/** blockMomentum left out: `defaultBlockMomentum(devices)` */
export interface BmufSpec {
  type: 'bmuf';
  period: number;
  blockMomentum?: number;
  blockLr: number;
  nesterov: boolean;
}

/** BMUF's block momentum when the config leaves it out: η = 1 − 1/G (Chen & Huo). */
export function defaultBlockMomentum(devices: number): number {
  return 1 - 1 / devices;
}

export const bmufEntry: StrategyEntry<BmufSpec> = {
  name: 'bmuf',
  schema: (f) =>
    f
      .options({
        period: f.posInt().default(1),
        blockMomentum: f.unitRange().optional(),
        blockLr: f.posNum().default(1),
        nesterov: f.bool().default(false),
      })
      .transform((o): BmufSpec => {
        const s: BmufSpec = { type: 'bmuf', period: o.period, blockLr: o.blockLr, nesterov: o.nesterov };
        if (o.blockMomentum !== undefined) s.blockMomentum = o.blockMomentum;
        return s;
      }),
  needsParameterServer: () => false,
  lockstep: true,
  create: (spec, { comm }) =>
    bmufStrategy(comm, {
      period: spec.period,
      blockMomentum: spec.blockMomentum ?? defaultBlockMomentum(comm.size),
      blockLr: spec.blockLr,
      nesterov: spec.nesterov,
    }),
};
