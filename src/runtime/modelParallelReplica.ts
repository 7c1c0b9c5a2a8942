import { Tensor } from '../tensor/tensor.ts';
import type { Backend } from '../kernels/backend.ts';
import type { Communicator } from '../comm/communicator.ts';
import type { ForwardContext } from '../nn/layer.ts';
import { SoftmaxCrossEntropy } from '../nn/softmaxCrossEntropy.ts';
import { createOptimizer, type Optimizer } from '../optim/optimizer.ts';
import { ModelParallelNet } from '../parallel/modelParallelNet.ts';
import { modelParallelLayers } from '../parallel/modelParallelPlan.ts';
import type { ReplicaView } from '../parallel/strategy.ts';
import { Replica, type StepResult } from './replica.ts';
import type { RunConfig } from '../config/runConfig.ts';

/** True when the config asks for "one weird trick" (some dense layer has `parallel: model`). */
export function isModelParallel(config: RunConfig): boolean {
  return modelParallelLayers(config.model).length > 0;
}

/**
 * One device of a "one weird trick" run: its replicated layers and its shards of the model-parallel
 * dense layers, one optimizer over both (optimizers are elementwise, so stepping the concatenation
 * equals stepping each part). The strategy (hybrid) sees only the replicated part; the shards'
 * gradients are already complete and must not be averaged.
 *
 * Rank 0 keeps an unsplit Replica, filled on demand by gather(), for evaluation and checkpoints —
 * so a checkpoint is the same file a one-device run writes.
 */
export class ModelParallelReplica {
  readonly net: ModelParallelNet;
  readonly optimizer: Optimizer;
  /** forward and backward contain collectives: every device runs every step, even without samples */
  readonly stepsWithoutSamples = true;
  private readonly loss: SoftmaxCrossEntropy;
  private input: Float32Array = new Float32Array(0);
  private full: Replica | null = null;

  constructor(readonly backend: Backend, readonly config: RunConfig, readonly comm: Communicator, options: { shared?: boolean } = {}) {
    this.net = new ModelParallelNet(backend, config.model, comm, options);
    this.net.initialize(config.train.seed);
    this.optimizer = createOptimizer(backend, config.optimizer, this.net.params.length);
    this.loss = new SoftmaxCrossEntropy(backend);
  }

  view(): ReplicaView {
    const { net } = this, r = net.replicatedLength;
    return {
      params: net.params.subarray(0, r), grads: net.grads.subarray(0, r), state: net.state,
      localStep: (lr) => this.optimizer.step(net.params, net.grads, lr),
    };
  }

  zeroGrads(): void {
    this.net.zeroGrads();
  }

  /** Not instrumented for the split model (its layers' buffers are per stage): reported as 0. */
  takePeakActivationBytes(): number {
    return 0;
  }

  /**
   * Forward and backward of this device's samples, which are rows [starts[rank], …) of a global batch
   * of `globalBatchSize`. `gradScale` is the data-parallel one (devices / global batch); the net
   * rescales the shards' gradients itself.
   */
  async computeGradientsAsync(images: Float32Array, labels: Int32Array, ctx: ForwardContext, gradScale: number,
                         onGradientsReady: ((offset: number) => void) | undefined, globalBatchSize: number): Promise<StepResult> {
    const n = labels.length, rows = this.net.rowsFor(globalBatchSize);
    if (rows.counts[this.comm.rank] !== n) {
      throw new Error(`device ${this.comm.rank}: got ${n} samples but the global batch of ${globalBatchSize} gives it ${rows.counts[this.comm.rank]}`);
    }
    if (this.input.length !== images.length) this.input = n ? this.backend.alloc(images.length) : new Float32Array(0);
    this.input.set(images);
    const x = new Tensor([n, ...this.config.model.input], this.input);
    const logits = await this.net.forward(x, rows, { ...ctx, training: true });
    if (n === 0) {
      await this.net.backward(logits, onGradientsReady);
      return { lossSum: 0, correct: 0, samples: 0 };
    }
    const { lossSum, correct, dlogits } = this.loss.compute(logits, labels, gradScale);
    await this.net.backward(dlogits, onGradientsReady);
    return { lossSum, correct, samples: n };
  }

  /**
   * Collective: assembles the unsplit model on rank 0 (weights and statistics; optimizer state too
   * when `withOptimizer`) from every device's shards. Returns it on rank 0, null elsewhere.
   */
  async gather(withOptimizer: boolean): Promise<Replica | null> {
    const { net, comm } = this;
    const sources = [net.params, ...(withOptimizer ? this.optimizer.state().buffers.map((b) => b.data) : [])];
    const full = comm.rank === 0 ? (this.full ??= new Replica(this.backend, this.config)) : null;
    const model = full?.model;
    const targets = model ? [model.params, ...(withOptimizer ? sources.slice(1).map(() => new Float32Array(model.params.length)) : [])] : [];
    if (model) for (const [k, src] of sources.entries()) net.placeIntoFull(src, 0, targets[k]!, model.paramEntries, true);
    // each device's shards reach rank 0 by broadcasts (collectives work between any two ranks on every
    // transport, point to point not always: hierarchical worlds link only some pairs)
    for (let r = 1; r < comm.size; r++) {
      const length = net.shardLength(r);
      if (length === 0) continue; // a section of parallel spatialSplits only: every weight is replicated
      for (const [k, src] of sources.entries()) {
        const shard = comm.rank === r ? src.subarray(net.replicatedLength, net.replicatedLength + length) : new Float32Array(length);
        await comm.broadcast(shard, r);
        if (model) net.placeIntoFull(shard, r, targets[k]!, model.paramEntries, false);
      }
    }
    if (!full || !model) return null;
    for (const e of net.stateEntries) {
      const to = model.stateEntries.find((s) => s.name === e.name)!;
      model.state.set(net.state.subarray(e.offset, e.offset + e.size), to.offset);
    }
    if (withOptimizer) {
      const names = this.optimizer.state().buffers.map((b) => b.name);
      full.optimizer.loadState({ step: this.optimizer.stepCount, buffers: names.map((name, k) => ({ name, data: targets[k + 1]! })) });
    }
    return full;
  }
}
