/**
 * A replica's optimizer: the whole one over all of params, built on first use, or — put in its
 * place by a sharded strategy (ZeRO, ReplicaView.shardOptimizer) before that — one with state for
 * this device's slice only, so the whole-size state is never allocated.
 */
import type { Backend } from '../../kernels/backend.ts';
import type { Communicator } from '../../comm/communicator.ts';
import type { OptimizerSpec } from '../../optim/spec.ts';
import { createOptimizer, type FlatRange, type Optimizer } from '../../optim/optimizer.ts';
import { ShardedOptimizer } from '../../parallel/sharding/shardedOptimizer.ts';
import type { ShardLayout } from '../../parallel/sharding/shardLayout.ts';
import type { ReplicaView } from '../../parallel/strategy.ts';

export class OptimizerSlot {
  private optimizer: Optimizer | null = null;

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

  /** The ReplicaView hooks that reach the optimizer (strategy.ts): ZeRO's sharding, 1-bit Adam's freeze. */
  viewHooks(): Pick<ReplicaView, 'shardOptimizer' | 'freezeOptimizerVariance'> {
    return {
      shardOptimizer: (layout, comm) => this.shard(layout, comm),
      freezeOptimizerVariance: () => {
        const o = this.get();
        if (!o.freezeVariance)
          throw new Error(
            `compression oneBit's freezeVariance needs optimizer adam or adamw, not ${this.spec.type}; leave freezeVariance out`,
          );
        o.freezeVariance();
      },
    };
  }

  /** Collective where sharded (every device calls it): the state whole, for a checkpoint's state(). */
  async assemble(): Promise<void> {
    if (this.optimizer instanceof ShardedOptimizer) await this.optimizer.assemble();
  }
}
