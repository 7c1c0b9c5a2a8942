/**
 * A replica's optimizer: the whole one over all of params, built on first use, or — put in its
 * place by a sharded strategy (ZeRO, ReplicaView.shardOptimizer) before that — one with state for
 * this device's slice only, so the whole-size state is never allocated. At ZeRO stage 2 the
 * model's gradient is sharded with it (ReplicaView.shardGradients, sharding/gradientShards.ts),
 * at stage 3 its weights too (ReplicaView.shardWeights, sharding/weightShards.ts).
 */
import type { Backend } from '../../kernels/backend.ts';
import type { Communicator } from '../../comm/communicator.ts';
import type { OptimizerSpec } from '../../optim/spec.ts';
import { createOptimizer, type FlatRange, type Optimizer } from '../../optim/optimizer.ts';
import { ShardedOptimizer } from '../../parallel/sharding/shardedOptimizer.ts';
import type { ShardLayout } from '../../parallel/sharding/shardLayout.ts';
import type { ReplicaView } from '../../parallel/strategy.ts';
import { WeightShards, type ShardableModel } from '../../parallel/sharding/weightShards.ts';
import { GradientShards } from '../../parallel/sharding/gradientShards.ts';
import { planRowBlocks, splitLayout } from '../../parallel/sharding/rowBlocks.ts';
import type { RunConfig } from '../../config/runConfig.ts';
import type { Poison } from './badSteps.ts';

/** The whole buffers a replica drops once sharded (ZeRO stage 2: the gradient, stage 3: the weights too); null: none. */
export function transientBuffers(config: RunConfig): 'grads' | 'params and grads' | null {
  const s = config.train.strategy;
  if (s.type !== 'hybrid') return null;
  return s.shard === 3 ? 'params and grads' : s.shard === 2 ? 'grads' : null;
}

export class OptimizerSlot {
  private optimizer: Optimizer | null = null;
  /** ZeRO stage 3: the model's owned weights and gradients */
  private weights: WeightShards | null = null;
  /** ZeRO stages 2 and 3: the model's owned gradient (stage 3: its weights' one) */
  private gradients: GradientShards | null = null;

  constructor(
    /** where the state lives: the GPU for the job's only device there, else the host */
    private readonly backend: Backend,
    private readonly spec: OptimizerSpec,
    /** floats of params */
    private readonly size: number,
    private readonly frozen: readonly FlatRange[],
    /** the weights stay on a GPU (deviceResidence.ts), where a sharded step cannot reach them */
    private readonly onDevice: boolean,
  ) {}

  get(): Optimizer {
    this.optimizer ??= createOptimizer(this.backend, this.spec, this.size, undefined, this.frozen);
    return this.optimizer;
  }

  /** ReplicaView.shardOptimizer: state for `layout`'s ranges only, in the whole one's place. */
  shard(layout: ShardLayout, comm: Communicator): ShardedOptimizer {
    // the config refuses both before (config/schema/deviceChecks.ts): a GPU's state, a split model's shards
    if (this.onDevice || layout.size !== this.size)
      throw new Error('train.strategy.hybrid.shard needs CPU devices and a whole model on each; use shard: 0');
    const sharded = new ShardedOptimizer(this.backend, this.spec, layout, comm, this.frozen);
    this.optimizer = sharded;
    return sharded;
  }

  /** ReplicaView.shardGradients (stage 2): the sharded optimizer, and the model's gradient sharded over the same layout. */
  shardGradients(model: unknown, layout: ShardLayout, comm: Communicator): GradientShards {
    const optimizer = this.shard(layout, comm);
    this.gradients = new GradientShards(shardable(model, 2), layout, comm, optimizer, this.alloc, this.frozen);
    return this.gradients;
  }

  /**
   * ReplicaView.shardWeights (stage 3): the sharded optimizer, and the model's weights and
   * gradient sharded over the same layout, with the dense layers above `rowBlockFloats` cut
   * into row blocks of their own (rowBlocks.ts).
   */
  shardWeights(model: unknown, buckets: ShardLayout, comm: Communicator, rowBlockFloats = 0): WeightShards {
    const m = shardable(model, 3);
    const blocks = planRowBlocks(m, rowBlockFloats);
    const layout = splitLayout(buckets, blocks);
    const optimizer = this.shard(layout, comm);
    this.weights = new WeightShards(m, layout, comm, optimizer, this.alloc, this.frozen, blocks);
    this.gradients = this.weights.gradients;
    return this.weights;
  }

  private readonly alloc = (n: number, shared?: boolean) => this.backend.alloc(n, shared);

  /**
   * ZeRO stages 2 and 3 (no whole gradient): an injected NaN goes where backward adds float 0's
   * gradient (GradientShards.inject). False: no sharded gradient to take it.
   */
  inject(poison: Poison): boolean {
    this.gradients?.inject((g) => poison(g, new Float32Array(0)));
    return this.gradients !== null;
  }

  /** The ReplicaView hooks that reach the optimizer (strategy.ts): ZeRO's sharding, 1-bit Adam's freeze and momentum. */
  viewHooks(
    model: unknown,
  ): Pick<
    ReplicaView,
    'shardOptimizer' | 'shardGradients' | 'shardWeights' | 'freezeOptimizerVariance' | 'optimizerMomentum'
  > {
    return {
      shardOptimizer: (layout, comm) => this.shard(layout, comm),
      shardGradients: (layout, comm) => this.shardGradients(model, layout, comm),
      shardWeights: (layout, comm, rowBlockFloats) => this.shardWeights(model, layout, comm, rowBlockFloats),
      freezeOptimizerVariance: () => {
        const o = this.get();
        if (!o.freezeVariance)
          throw new Error(
            `compression oneBit's freezeVariance needs optimizer adam or adamw, not ${this.spec.type}; leave freezeVariance out`,
          );
        o.freezeVariance();
      },
      optimizerMomentum: () => {
        const momentum = this.get().momentum?.();
        if (!momentum)
          throw new Error(
            `compression oneBit's freezeVariance compresses Adam's momentum, and optimizer ${this.spec.type} has none; use adam or adamw, or leave freezeVariance out`,
          );
        return momentum;
      },
    };
  }

  /**
   * Collective where sharded (every device calls it): the weights whole (stage 3) and, with
   * `optimizer`, the state whole, for a checkpoint's state().
   */
  async assemble(optimizer = true): Promise<void> {
    await this.weights?.unshard();
    if (optimizer && this.optimizer instanceof ShardedOptimizer) await this.optimizer.assemble();
  }
}

/** `model` as ZeRO stages 2 and 3 bind its layers (nn/model.ts Sequential). */
function shardable(model: unknown, stage: 2 | 3): ShardableModel {
  const m = model as Partial<ShardableModel>;
  if (!m.bindLayer || !m.layerParamRange || !m.sharedWeightsOf)
    throw new Error(`train.strategy.hybrid.shard ${stage} needs a whole model on each device; use shard: 1`);
  return m as ShardableModel;
}
