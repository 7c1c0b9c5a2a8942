import type { Communicator } from '../../comm/communicator.ts';
import { restoreTensor, type Strategy } from '../strategy.ts';
import { periodicAveragingStrategy, type OuterUpdate } from './periodicAveraging.ts';
import type { StrategyEntry } from './entry.ts';
import { CompressedDeltas } from '../compression/compressedDeltas.ts';
import { compressionSchema, type CompressionSpec } from '../compression/spec.ts';

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
 *
 * Classic BMUF is DiLoCo (diloco.ts) with outer SGD, momentum η and lr ζ, on the outer gradient
 * g = s − w̄: torch's v ← η·v + g; s ← s − ζ·v is the rule above with Δ = −ζ·v. (Nesterov is not
 * torch's: here s moves by (1 + η)·Δ_t, there by (1 + η)·Δ_t − η·Δ_{t−1}.)
 */
export function bmufStrategy(comm: Communicator, o: BmufOptions, deltas?: CompressedDeltas): Strategy {
  let theta: Float32Array, delta: Float32Array;
  const rule: OuterUpdate = {
    begin(start) {
      theta = start.slice();
      delta = new Float32Array(start.length);
    },
    apply(start, mean) {
      const { blockMomentum: eta, blockLr: zeta, nesterov } = o;
      for (let i = 0; i < start.length; i++) {
        const d = eta * delta[i]! + zeta * (mean[i]! - start[i]!);
        delta[i] = d;
        const t = start[i]! + d;
        theta[i] = t;
        start[i] = nesterov ? t + eta * d : t;
      }
    },
    model: () => theta,
    save: () => ({ tensors: { theta, delta }, counters: {} }),
    restore(state) {
      restoreTensor(state, 'theta', theta);
      restoreTensor(state, 'delta', delta);
    },
  };
  return periodicAveragingStrategy('bmuf', comm, o.period, rule, deltas);
}

/** blockMomentum left out: `defaultBlockMomentum(devices)` */
export interface BmufSpec {
  type: 'bmuf';
  period: number;
  blockMomentum?: number;
  blockLr: number;
  nesterov: boolean;
  /** the model deltas sent compressed, with error feedback (compression/compressedDeltas.ts); absent: plain floats */
  compression?: CompressionSpec;
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
        compression: compressionSchema(f).optional(),
      })
      .transform((o): BmufSpec => {
        const s: BmufSpec = { type: 'bmuf', period: o.period, blockLr: o.blockLr, nesterov: o.nesterov };
        if (o.blockMomentum !== undefined) s.blockMomentum = o.blockMomentum;
        if (o.compression) s.compression = o.compression;
        return s;
      }),
  needsParameterServer: () => false,
  lockstep: true,
  create: (spec, { comm, seed }) =>
    bmufStrategy(
      comm,
      {
        period: spec.period,
        blockMomentum: spec.blockMomentum ?? defaultBlockMomentum(comm.size),
        blockLr: spec.blockLr,
        nesterov: spec.nesterov,
      },
      spec.compression && new CompressedDeltas(comm, spec.compression, seed ?? 0),
    ),
};
