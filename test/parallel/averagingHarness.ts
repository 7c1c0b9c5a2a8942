/**
 * bsp, bmuf and diloco driven by hand on in-process devices, with or without compressed deltas
 * (compression-averaging*.test.ts): SGD replicas on rank-dependent gradients, each device weighted
 * by rank + 1 samples a step (bsp's weighted average), resumed the way the runtime resumes them.
 */
import type { Communicator } from '../../src/comm/communicator.ts';
import { CompressedDeltas } from '../../src/parallel/compression/compressedDeltas.ts';
import type { CompressionSpec } from '../../src/parallel/compression/spec.ts';
import { bmufStrategy } from '../../src/parallel/strategies/bmuf.ts';
import { bspStrategy } from '../../src/parallel/strategies/bsp.ts';
import { dilocoStrategy } from '../../src/parallel/strategies/diloco.ts';
import type { ParamTensor, Strategy, StrategyState } from '../../src/parallel/strategy.ts';
import { localGroup } from './localGroup.ts';
import { sgdReplica, stepInfo } from './strategyHarness.ts';
import { randomArray } from '../util/close.ts';

export type Make = (comm: Communicator, deltas?: CompressedDeltas) => Strategy;

/** The three averaging strategies, every one with period 3. */
export const AVERAGING: Record<string, Make> = {
  bsp: (c, d) => bspStrategy(c, 3, d),
  bmuf: (c, d) => bmufStrategy(c, { period: 3, blockMomentum: 0.5, blockLr: 1, nesterov: false }, d),
  diloco: (c, d) => dilocoStrategy(c, 3, { type: 'sgd', lr: 0.7, momentum: 0.9, nesterov: true, weightDecay: 0 }, d),
};

/** Two matrices and a bias. */
export const TENSORS: ParamTensor[] = [
  { name: 'a.kernel', shape: [12, 10], offset: 0 },
  { name: 'a.bias', shape: [10], offset: 120 },
  { name: 'b.kernel', shape: [10, 3], offset: 130 },
];
export const N = 160;

export interface RunOptions {
  devices?: number;
  from?: number;
  to: number;
  /** close the last partial period (onFinish) */
  finish?: boolean;
  /** resuming: each device's weights and saved state, put back after onStart as the runtime does */
  resume?: { params: Float32Array[]; states: StrategyState[] };
  /** wraps each device's communicator (counting bytes) */
  wrap?: (c: Communicator) => Communicator;
  /** after onStart (and the restore): before the first step */
  started?: () => void;
  /** this device's weights, changed before the step's afterStep (an overflow) */
  poke?: (rank: number, step: number, params: Float32Array) => void;
  tensors?: ParamTensor[];
  length?: number;
}

/** Steps [from, to) of `make` on `devices` devices (compressed with `spec` when given): the job's model, every replica and state. */
export async function runAveraging(make: Make, spec: CompressionSpec | null, o: RunOptions) {
  const n = o.length ?? N;
  const comms = localGroup(o.devices ?? 2).map(o.wrap ?? ((c) => c));
  const init = randomArray(n, 50);
  const reps = comms.map(() => Object.assign(sgdReplica([...init], [0]), { tensors: o.tensors ?? TENSORS }));
  const deltas = comms.map((c) => (spec ? new CompressedDeltas(c, spec, 9) : undefined));
  const strategies = comms.map((c, r) => make(c, deltas[r]));
  await Promise.all(strategies.map((s, r) => s.onStart!(reps[r]!)));
  if (o.resume)
    for (const [r, s] of strategies.entries()) {
      reps[r]!.params.set(o.resume.params[r]!);
      s.restoreState!(o.resume.states[r]!);
    }
  o.started?.();
  for (let step = o.from ?? 0; step < o.to; step++) {
    for (const [r, rep] of reps.entries()) {
      rep.grads.set(randomArray(n, 10 * step + r + 1));
      rep.localStep(0.3);
      rep.state[0] = rep.state[0]! + r + 1;
      o.poke?.(r, step, rep.params);
    }
    await Promise.all(strategies.map((s, r) => s.afterStep!(reps[r]!, stepInfo(step, 0.3, r + 1))));
  }
  if (o.finish) await Promise.all(strategies.map((s, r) => s.onFinish!(reps[r]!)));
  const model = strategies[0]!.modelParams ? await strategies[0]!.modelParams(reps[0]!) : reps[0]!.params;
  return {
    comms,
    model: model.slice(),
    params: reps.map((rep) => rep.params.slice()),
    stats: reps.map((rep) => rep.state[0]!),
    // a copy, as a checkpoint set holds it
    states: strategies.map((s): StrategyState => {
      const st = s.saveState!();
      return {
        counters: { ...st.counters },
        tensors: Object.fromEntries(Object.entries(st.tensors).map(([k, v]) => [k, v.slice()])),
      };
    }),
  };
}
