/**
 * A strategy is a small object with the hooks the training loop calls (docs/architecture.md). The loop is the
 * same for every strategy; what differs is what happens around the optimizer step.
 */
import type { ParameterServerSnapshot } from './parameterServer/index.ts';
import type { Communicator } from '../comm/communicator.ts';
import type { ShardLayout } from './sharding/shardLayout.ts';
import type { ShardedOptimizer } from './sharding/shardedOptimizer.ts';
import type { WeightShards } from './sharding/weightShards.ts';
import type { GradientShards } from './sharding/gradientShards.ts';
import type { TreeNode } from '../optim/treeSquares.ts';

/** A device's part of a flat gradient: its values, from index `start` of the whole. */
export interface GradientPart {
  values: Float32Array;
  start: number;
}

/** What a strategy may act on: the replica's flat buffers and its local optimizer step. */
export interface ReplicaView {
  readonly params: Float32Array;
  readonly grads: Float32Array;
  /** non-trained state (BatchNorm statistics) */
  readonly state: Float32Array;
  /** one local optimizer update with learning rate lr */
  localStep(lr: number): void;
  /**
   * Whether the gradient about to be applied by localStep is free of NaN/Inf. Absent: check
   * `grads`. A GPU that keeps the gradient (the job's only device) answers from the step's read.
   */
  gradientsFinite?(): boolean;
  /**
   * train.clipGradNorm (absent when clipping is off): scales the gradient about to be applied so its
   * global L2 norm is at most the bound, and records the norm before clipping for the step event.
   * Without an argument: this replica's whole gradient (a split model's shards too, their norm
   * summed over the devices: a collective then); with one: that buffer (a gradient to push).
   * Call it only on finite gradients: a step with NaN/Inf is skipped, never clipped.
   */
  clipGradients?(grads?: Float32Array): Promise<void>;
  /**
   * train.clipGradNorm on a gradient of `length` floats split over the devices (absent when
   * clipping is off): `parts` are this device's, each at its index of the whole gradient; `gather`
   * gives every device's nodes of the squares' tree (collective, optim/treeSquares.ts). The norm is
   * the whole gradient's, to the bit, and the parts are scaled as clipGradients scales a whole one.
   */
  clipGradientParts?(
    parts: readonly GradientPart[],
    length: number,
    gather: (mine: readonly TreeNode[]) => Promise<TreeNode[]>,
  ): Promise<void>;
  /** The offsets backward reports to onGradientsReady, in order (a strategy may plan its buckets from them). */
  readonly gradientReadyOffsets?: readonly number[];
  /**
   * ZeRO sharding (sharding/): from now on the replica's optimizer keeps state only for `layout`'s
   * ranges of params and localStep updates only those. Called in onStart, before any step, so the
   * whole-size state is never allocated; `comm` assembles the whole state for checkpoints.
   */
  shardOptimizer?(layout: ShardLayout, comm: Communicator): ShardedOptimizer;
  /**
   * ZeRO stage 2: as shardOptimizer, and the model keeps only `layout`'s ranges of its reduced
   * gradient from the next GradientShards.shard() on, each unit's reduced during backward.
   */
  shardGradients?(layout: ShardLayout, comm: Communicator): GradientShards;
  /**
   * ZeRO stage 3: as shardOptimizer, and the model keeps only `layout`'s ranges of its weights and
   * gradients from the next WeightShards.shard() on, gathering the rest layer by layer as it runs;
   * a dense layer of more than `rowBlockFloats` (> 0) a block of kernel rows at a time, its blocks
   * pieces of the WeightShards' layout of their own.
   */
  shardWeights?(layout: ShardLayout, comm: Communicator, rowBlockFloats?: number): WeightShards;
  /**
   * 1-bit Adam (compression oneBit's freezeVariance): from now on the replica's Adam leaves its
   * variance as it is (Optimizer.freezeVariance); again later, or after a resume, it changes nothing.
   */
  freezeOptimizerVariance?(): void;
  /**
   * 1-bit Adam: the replica's Adam first moment m (the live buffer over `grads`' floats) and its β1,
   * which the compression adds to each device's gradient so that the momentum is what it compresses.
   */
  optimizerMomentum?(): { m: Float32Array; beta1: number };
  /**
   * The weight tensors of `params`/`grads` (the replicated part), from the model's flat layout:
   * gradient compression treats each matrix as one (compression/). Absent: the buffers are one vector.
   */
  readonly tensors?: readonly ParamTensor[];
}

/** One weight tensor of a replica's flat buffers: its checkpoint name, shape and first float. */
export interface ParamTensor {
  name: string;
  shape: readonly number[];
  offset: number;
}

export interface StepInfo {
  /** global step counter (0-based) */
  step: number;
  epoch: number;
  lr: number;
  /** samples this replica processes in this step */
  samples: number;
  /** this device's loss is NaN/Inf: the step is to be skipped (see nonFinite.ts) */
  lossNonFinite?: boolean;
  /**
   * this device's shards of `parallel: model` layers have a NaN/Inf gradient: the step is to be
   * skipped on every device (the shards' gradients are never reduced, so nothing else carries it)
   */
  shardsNonFinite?: boolean;
}

/** Counters a strategy reports with each step (staleness of async gradients, …). */
export interface StrategyStepStats {
  staleness?: number;
  /** gradients dropped for exceeding the staleness bound */
  dropped?: number;
  /** the update was skipped because of a NaN/Inf loss or gradient (on every device alike, in lockstep strategies) */
  skipped?: boolean;
}

/**
 * What a strategy keeps from step to step, for checkpoint sets: buffers (BMUF's block momentum,
 * EASGD's centre, …) under names, and counters (steps since the last average, …).
 */
export interface StrategyState {
  tensors: Record<string, Float32Array>;
  counters: Record<string, number>;
}

export interface Strategy {
  readonly name: string;
  /** Before the first step: register buffers, broadcast rank 0's initial weights. */
  onStart?(replica: ReplicaView): Promise<void>;
  /** Before forward/backward: e.g. wait for this device's turn, pull fresh weights. */
  beforeStep?(replica: ReplicaView, info: StepInfo): Promise<void>;
  /**
   * During backward: grads[offset:] are final (the layers after some point are done). Lets a
   * strategy start reducing gradient buckets before backward finishes. Called in the same order on
   * every device. A Promise it returns is awaited before backward goes on (hybrid: a turn of the
   * event loop, in which buckets in flight over TCP move).
   */
  onGradientsReady?(replica: ReplicaView, offset: number): void | Promise<void>;
  /**
   * After backward, instead of the plain local optimizer step: e.g. all-reduce gradients then step,
   * or push gradients to a parameter server. Default: replica.localStep(lr).
   */
  applyUpdate?(replica: ReplicaView, info: StepInfo): Promise<StrategyStepStats | undefined>;
  /** After the update: e.g. every K steps average models, elastic pull, block momentum. */
  afterStep?(replica: ReplicaView, info: StepInfo): Promise<void>;
  /** When this replica has no more data: leave averaging cleanly, final consolidation. */
  onFinish?(replica: ReplicaView): Promise<void>;
  /**
   * The weights that represent the job's model now (evaluation, checkpoints): the server's for
   * parameter-server strategies, the centre for EASGD, the block model for BMUF; default the replica's.
   */
  modelParams?(replica: ReplicaView): Promise<Float32Array>;
  /** At a step boundary: the state to save in a checkpoint set (none: the strategy keeps nothing between steps). */
  saveState?(): StrategyState;
  /**
   * On resume, after onStart (whose broadcast made every replica rank 0's): this device's saved
   * state back. Called with what saveState returned, from this device or (resized) the device the
   * resize rule maps it to.
   */
  restoreState?(state: StrategyState): void;
  /**
   * Strategies with a parameter server: the server's whole state now (weights, optimizer slots,
   * update count), which checkpoint sets save as the job's (set by createStrategy).
   */
  serverSnapshot?(): Promise<ParameterServerSnapshot>;
  /**
   * Lockstep strategies only: sums a small vector over every device (a collective every device
   * calls at the same point). The loop uses it to agree on skipping a step with a non-finite
   * gradient, and on the message when too many in a row stop the run.
   */
  agree?(values: Float32Array): Promise<void>;
}

/** A saved tensor of a strategy's state copied into `into`; a missing or wrong-sized one is an error naming it. */
export function restoreTensor(state: StrategyState, name: string, into: Float32Array): void {
  const t = state.tensors[name];
  if (!t)
    throw new Error(`checkpoint: the strategy state has no '${name}'; the checkpoint was written by another strategy`);
  if (t.length !== into.length)
    throw new Error(
      `checkpoint: the strategy state '${name}' holds ${t.length} values, this model needs ${into.length}`,
    );
  into.set(t);
}

/** A saved counter of a strategy's state (0 when absent). */
export function counter(state: StrategyState, name: string): number {
  return state.counters[name] ?? 0;
}

/** One device on its own: the plain optimizer step, nothing else. */
export const localStrategy: Strategy = { name: 'local' };
