import type { Communicator } from '../../comm/communicator.ts';
import { jsBackend } from '../../kernels/js/index.ts';
import { createOptimizer, type Optimizer } from '../../optim/optimizer.ts';
import type { OptimizerSpec } from '../../optim/spec.ts';
import { counter, type Strategy, type StrategyState } from '../strategy.ts';
import { periodicAveragingStrategy, type OuterUpdate } from './periodicAveraging.ts';
import type { StrategyEntry } from './entry.ts';
import { CompressedDeltas } from '../compression/compressedDeltas.ts';
import { compressionSchema, type CompressionSpec } from '../compression/spec.ts';

/** The outer optimizer of the DiLoCo paper: SGD with Nesterov momentum 0.9, lr 0.7. */
export const PAPER_OUTER: Extract<OptimizerSpec, { type: 'sgd' }> = {
  type: 'sgd',
  lr: 0.7,
  momentum: 0.9,
  nesterov: true,
  weightDecay: 0,
};

/** The paper's H: inner steps between outer steps. */
export const PAPER_PERIOD = 500;

/** Where the outer optimizer's slots go in a checkpoint set's strategy state (`outer.velocity`, `outer.m`, …). */
const slotName = (name: string) => `outer.${name}`;

/**
 * DiLoCo (Douillard et al. 2023): every device trains with the config's optimizer (the inner one)
 * for `period` steps from a common start s; then, with w̄ the mean of the replicas, the outer
 * gradient g = s − w̄ is applied to s by the outer optimizer, s ← outer.step(s, g, outer.lr), with
 * torch.optim's SGD (momentum, Nesterov), Adam or AdamW semantics (src/optim/optimizer.ts, on the
 * host), and every replica restarts from s, which is also the job's model. Outer SGD with lr 1 and
 * no momentum is plain model averaging (bsp); outer SGD with momentum η and lr ζ is classic BMUF
 * (bmuf.ts). The inner optimizer's state stays each device's own.
 */
export function dilocoStrategy(
  comm: Communicator,
  period: number,
  outerSpec: OptimizerSpec,
  deltas?: CompressedDeltas,
): Strategy {
  let outer: Optimizer;
  const rule: OuterUpdate = {
    begin(start) {
      outer = createOptimizer(jsBackend, outerSpec, start.length);
    },
    apply(start, mean) {
      // g = s − w̄, written over the mean (the replicas are reset to s next)
      for (let i = 0; i < start.length; i++) mean[i] = start[i]! - mean[i]!;
      outer.step(start, mean, outerSpec.lr);
    },
    model: (start) => start,
    save(): StrategyState {
      const { step, buffers } = outer.state();
      return {
        tensors: Object.fromEntries(buffers.map((b) => [slotName(b.name), b.data])),
        counters: { outerSteps: step },
      };
    },
    restore(state) {
      for (const b of outer.state().buffers) {
        const saved = state.tensors[slotName(b.name)];
        if (!saved || saved.length !== b.data.length) {
          throw new Error(
            `checkpoint: the strategy state has no outer optimizer slot '${slotName(b.name)}' of ${b.data.length} values; ` +
              `the checkpoint set was written with another train.strategy.diloco.outer (or another model); resume with that one`,
          );
        }
        b.data.set(saved);
      }
      outer.stepCount = counter(state, 'outerSteps');
    },
  };
  return periodicAveragingStrategy('diloco', comm, period, rule, deltas);
}

export interface DilocoSpec {
  type: 'diloco';
  period: number;
  /** the outer optimizer; its lr is the outer learning rate (constant: the schedule is the inner optimizer's) */
  outer: OptimizerSpec;
  /** the model deltas sent compressed, with error feedback (compression/compressedDeltas.ts); absent: plain floats */
  compression?: CompressionSpec;
}

export const dilocoEntry: StrategyEntry<DilocoSpec> = {
  name: 'diloco',
  schema: (f) =>
    f
      .options({
        period: f.posInt().default(PAPER_PERIOD),
        outer: f.optimizer().default(() => ({ ...PAPER_OUTER })),
        compression: compressionSchema(f).optional(),
      })
      .transform(
        (o): DilocoSpec => ({
          type: 'diloco',
          period: o.period,
          outer: o.outer,
          ...(o.compression ? { compression: o.compression } : {}),
        }),
      ),
  needsParameterServer: () => false,
  lockstep: true,
  create: (spec, { comm, seed }) =>
    dilocoStrategy(
      comm,
      spec.period,
      spec.outer,
      spec.compression && new CompressedDeltas(comm, spec.compression, seed ?? 0),
    ),
};
