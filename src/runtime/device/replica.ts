import { Tensor } from '../../tensor/tensor.ts';
import type { Backend } from '../../kernels/backend.ts';
import { hostBackend } from '../../kernels/hostBackend.ts';
import { buildModel, type Sequential } from '../../nn/model.ts';
import { createLoss } from '../../nn/losses.ts';
import type { Loss } from '../../nn/loss.ts';
import type { SequenceBatch } from '../../data/batcher.ts';
import { shapeSize, VARIABLE } from '../../tensor/shape.ts';
import { clipCoefficient, clipToNorm, sumOfSquares } from '../../optim/clipGradNorm.ts';
import { allFinite } from '../../parallel/nonFinite.ts';
import { DeviceResidence } from './deviceResidence.ts';
import type { Poison } from './badSteps.ts';
import type { ForwardContext } from '../../nn/layer.ts';
import type { TrainableModel } from '../../nn/trainableModel.ts';
import type { Communicator } from '../../comm/communicator.ts';
import { ModelParallelNet } from '../../parallel/modelParallel/net.ts';
import { tensorGroupsOf, type TensorGroups } from '../../parallel/modelParallel/tensorGroups.ts';
import { pipelineStage } from '../../parallel/pipeline/net.ts';
import { modelParallelLayers } from '../../parallel/modelParallel/plan.ts';
import { synchroniseBatchNorm } from '../../parallel/syncBatchNorm.ts';
import type { FlatRange, Optimizer } from '../../optim/optimizer.ts';
import { frozenRanges, paramEntriesOf } from './frozenLayers.ts';
import type { RunConfig } from '../../config/runConfig.ts';
import type { ReplicaView } from '../../parallel/strategy.ts';
import { accumulateMicroBatches } from '../../parallel/microbatch.ts';
import { locateNonFinite, type ProbeBatch } from './nonFiniteProbe.ts';
import type { StepResult } from './gradientSource.ts';
import { checkDeviceModel } from './deviceModelCheck.ts';
import { clipGradientParts } from '../../parallel/sharding/clipParts.ts';
import { OptimizerSlot, transientBuffers } from './optimizerSlot.ts';
import { checkLossOutput } from './lossOutputCheck.ts';

/** True when the config asks for "one weird trick" (some layer has `parallel: model`). */
export function isModelParallel(config: RunConfig): boolean {
  return modelParallelLayers(config.model).length > 0;
}

/**
 * One device's model with its optimizer and loss: what every strategy acts on. The model is the
 * whole one (`Sequential`, the default) or, in a model-parallel run, this device's part of it
 * (`ModelParallelNet`: its replicated layers and its shards). One optimizer steps all of params
 * (optimizers are elementwise, so stepping the concatenation equals stepping each part); the
 * strategy sees only the replicated part, as the shards' gradients are already complete.
 * The optimizer is built on first use, or a sharded strategy's takes its place (optimizerSlot.ts).
 */
export class Replica<M extends TrainableModel = Sequential> {
  readonly model: M;
  private readonly optimizers: OptimizerSlot;
  readonly loss: Loss;
  private input: Float32Array = new Float32Array(0);
  /** a split model's devices: the shards' part of the gradient norm is summed over them */
  private shardComm: Communicator | null = null;
  /** train.tensorParallel's groups (null: the whole job splits the section) */
  private groups: TensorGroups | null = null;
  /** the gradient norm before clipping, of the last clipGradients (undefined: none since the last take) */
  private gradNorm: number | undefined;
  private readonly normScratch = new Float32Array(1);
  /** rank 0 of a split model: the unsplit replica gather() fills, for evaluation and checkpoints */
  private whole: Replica | null = null;
  /** the params (and grads) of frozen layers: never updated, left out of the clipped gradient's norm */
  private readonly frozen: readonly FlatRange[];
  /** on a GPU: what crosses to the host and when (null on a CPU, whose arrays are the host's) */
  private readonly residence: DeviceResidence | null;

  /** `model` defaults to the config's whole model, built and initialised here. */
  constructor(
    readonly backend: Backend,
    readonly config: RunConfig,
    options: { shared?: boolean; alone?: boolean } = {},
    model?: M,
  ) {
    // on a GPU (backend.device): the job's only device keeps everything there; one among several
    // hands its gradients to the host, which keeps the weights (deviceResidence.ts)
    if (backend.device) checkDeviceModel(config);
    const resident = backend.device !== undefined && options.alone === true;
    const host = hostBackend(backend);
    if (model) this.model = model;
    else {
      // ZeRO stage 2 (3) on one of several devices drops the whole gradient (and weights) at its first step: not on the backend's heap
      const transient = options.alone === false ? (transientBuffers(config) ?? undefined) : undefined;
      const built = buildModel(backend, config.model, { ...options, transient });
      built.initialize(config.train.seed);
      this.model = built as TrainableModel as M;
    }
    // train.initFrom.freeze: the optimizer leaves those layers' weights alone (frozenLayers.ts)
    this.frozen = frozenRanges(config, paramEntriesOf(this.model));
    const size = this.model.params.length,
      onDevice = backend.device !== undefined;
    this.optimizers = new OptimizerSlot(resident ? backend : host, config.optimizer, size, this.frozen, onDevice);
    this.loss = createLoss(host, config.loss);
    this.residence = backend.device
      ? new DeviceResidence(backend, this.model, this.loss, resident, () =>
          this.optimizer.state().buffers.map((b) => b.data),
        )
      : null;
    checkLossOutput(this.loss.task, this.model.outputShape);
  }

  /** The optimizer over all of params, or the sharded one a strategy set. */
  get optimizer(): Optimizer {
    return this.optimizers.get();
  }

  /** The model's flat buffers (the replicated part) and a local optimizer step over all of them, as strategies see them. */
  view(): ReplicaView {
    const model = this.model,
      r = model.replicatedLength,
      whole = r === model.params.length;
    // read at each use, never kept: ZeRO stages 2 and 3 drop the whole buffers for their shards (gradientShards.ts)
    const [p, g] = whole ? [null, null] : [model.params.subarray(0, r), model.grads.subarray(0, r)];
    const view: ReplicaView = {
      get params() {
        return p ?? model.params;
      },
      get grads() {
        return g ?? model.grads;
      },
      state: model.state,
      localStep: (lr) => this.optimizer.step(model.params, model.grads, lr),
      gradientsFinite: () => (this.residence?.resident ? this.residence.gradientsFinite() : allFinite(model.grads)),
      gradientReadyOffsets: model.gradientReadyOffsets,
      ...this.optimizers.viewHooks(model),
      // the replicated layers' tensors (a split model's shards lie after replicatedLength)
      tensors:
        model instanceof ModelParallelNet ? model.replicatedEntries : (model as unknown as Sequential).paramEntries,
    };
    if (this.config.train.clipGradNorm !== undefined) {
      view.clipGradients = (g) => this.clipGradients(g);
      view.clipGradientParts = async (parts, length, gather) => {
        const max = this.config.train.clipGradNorm!;
        this.gradNorm = await clipGradientParts(this.model.grads, this.frozen, parts, length, gather, max);
      };
    }
    return view;
  }

  /**
   * train.clipGradNorm on `grads`, or on the whole gradient: the replicated part (the same on every
   * device once reduced) and a split model's shards, whose squares are summed over the devices.
   */
  private async clipGradients(grads?: Float32Array): Promise<void> {
    const max = this.config.train.clipGradNorm!;
    const all = this.model.grads,
      r = this.model.replicatedLength;
    if (this.residence?.resident && !grads) {
      // on the device: the norm came with the step's read (frozen ranges zeroed there)
      this.gradNorm = Math.sqrt(this.residence.squaredNorm());
      const coef = clipCoefficient(this.gradNorm, max);
      if (coef !== null) this.backend.scale(coef, all);
      return;
    }
    // frozen layers have no gradient to speak of, as in PyTorch: it neither counts nor is applied
    const target = grads ?? all;
    for (const f of this.frozen) if (f.start < target.length) target.fill(0, f.start, Math.min(f.end, target.length));
    let squares: number;
    if (grads) squares = sumOfSquares(grads);
    else {
      squares = sumOfSquares(r === all.length ? all : all.subarray(0, r));
      if (this.shardComm) {
        this.normScratch[0] = (this.model as unknown as ModelParallelNet).shardGradSquares();
        await this.shardComm.allreduce(this.normScratch, 'sum');
        squares += this.normScratch[0]!;
      }
    }
    this.gradNorm = Math.sqrt(squares);
    clipToNorm([grads ?? all], this.gradNorm, max);
  }

  /** The pre-clip gradient norm of this step (undefined when nothing was clipped since the last call). */
  takeGradNorm(): number | undefined {
    const norm = this.gradNorm;
    this.gradNorm = undefined;
    return norm;
  }

  /**
   * Zeroes the gradients (on the device alone where they stay there); `poison` then writes an
   * injected NaN into them, which backward adds to (FaultPlan `nan`).
   */
  zeroGrads(poison?: Poison): void {
    const { model } = this;
    if (this.residence?.resident && !poison) {
      this.backend.fill(model.grads, 0);
      return;
    }
    model.zeroGrads();
    if (!poison) return;
    // ZeRO stages 2 and 3 keep no whole gradient: the shards take the NaN
    if (model.grads.length === 0 && this.optimizers.inject(poison)) return;
    poison(model.grads.subarray(0, model.replicatedLength), model.grads.subarray(model.replicatedLength));
    model.device?.fromHost([model.grads]);
  }

  /** The gradients of this device's model-parallel shards (after the replicated part; empty for a whole model). */
  shardGrads(): Float32Array {
    const { grads, replicatedLength: r } = this.model;
    // a whole model's is a new empty array: a view would keep the gradient buffer alive (ZeRO stages 2 and 3 drop it)
    return r === grads.length ? new Float32Array(0) : grads.subarray(r);
  }

  /**
   * A replica of `config` on one of the devices of `comm`: split when the config marks layers
   * `parallel: model` and there are several devices ("one weird trick"), else the whole model,
   * whose BatchNorm layers synchronise over `comm` with train.syncBatchNorm. (A split model's
   * data-parallel layers skip steps where the device has no rows, so they cannot take part in
   * collectives: its BatchNorm stays per device.)
   */
  static create(
    backend: Backend,
    config: RunConfig,
    options: { shared?: boolean; comm?: Communicator } = {},
  ): Replica<TrainableModel> {
    const { comm } = options;
    // a pipeline stage: this device's layers, the micro-batches streamed over `comm` (parallel/pipeline/)
    if (config.train.pipeline && comm)
      return new Replica(backend, config, options, pipelineStage(backend, config, comm, options));
    if (!comm || comm.size < 2 || !isModelParallel(config)) {
      const replica = new Replica(backend, config, { ...options, alone: !comm || comm.size < 2 });
      if (config.train.syncBatchNorm && comm) synchroniseBatchNorm(replica.model, comm);
      return replica;
    }
    const groups = tensorGroupsOf(comm, config.train.tensorParallel);
    const net = new ModelParallelNet(backend, config.model, groups?.tensor ?? comm, options);
    net.initialize(config.train.seed);
    const replica = new Replica(backend, config, options, net);
    replica.shardComm = groups?.tensor ?? comm;
    replica.groups = groups;
    return replica;
  }

  /** Layers that communicate (synchronised BatchNorm, a model-parallel section) need every device in every step. */
  get stepsWithoutSamples(): boolean {
    return this.model.needsAsync;
  }

  takePeakActivationBytes(): number {
    return this.model.takePeakActivationBytes();
  }

  get gradientReadyOffsets(): readonly number[] {
    return this.model.gradientReadyOffsets;
  }

  /**
   * The whole model for evaluation and checkpoints, on rank 0 (null elsewhere). A split model is
   * assembled from every device's part — collective, so every device calls this at the same
   * points — with the optimizer state when `withOptimizer`; a whole model is this replica.
   */
  async gather(rank: number, withOptimizer: boolean): Promise<Replica | null> {
    const { model } = this;
    // a model that cannot gather is whole: this replica is a Replica<Sequential>
    if (!model.gatherWhole) {
      await this.hostCopies();
      // sharded weights (stage 3) and optimizer state are assembled whole (collective)
      await this.optimizers.assemble(withOptimizer);
      return rank === 0 ? (this as unknown as Replica) : null;
    }
    const sources = [model.params, ...(withOptimizer ? this.optimizer.state().buffers.map((b) => b.data) : [])];
    const whole = rank === 0 ? (this.whole ??= new Replica(this.backend, this.config)) : null;
    const full = whole?.model;
    const buffers = full ? [full.params, ...sources.slice(1).map(() => new Float32Array(full.params.length))] : [];
    await model.gatherWhole(
      sources,
      full ? { buffers, paramEntries: full.paramEntries, state: full.state, stateEntries: full.stateEntries } : null,
    );
    if (!whole) return null;
    if (withOptimizer) {
      const { buffers: held, ...counts } = this.optimizer.state();
      whole.optimizer.loadState({
        ...counts,
        buffers: held.map((b, k) => ({ name: b.name, data: buffers[k + 1]! })),
      });
    }
    return whole;
  }

  /** The task the configured loss trains for. */
  get task(): Loss['task'] {
    return this.loss.task;
  }

  /** Scores the model produces per sample (must equal the dataset's classes, or its targets per sample). */
  get classes(): number {
    return this.model.outputShape[0]!;
  }

  /** Copies a batch into a backend-owned buffer (so the wasm backend computes without copies); `frames`: a sequence batch's T. */
  batchTensor(images: Float32Array, n: number, frames = 0): Tensor {
    // grow-only: a short last batch or the evaluation batch must not allocate again and again
    if (this.input.length < images.length) this.input = this.backend.alloc(images.length);
    const input = this.input.length === images.length ? this.input : this.input.subarray(0, images.length);
    input.set(images);
    this.backend.device?.fromHost([input]);
    return new Tensor([n, ...this.model.inputShape.map((d) => (d === VARIABLE ? frames : d))], input);
  }

  /**
   * Forward and backward on one batch, ACCUMULATING gradients (zero them first for a fresh step).
   * `gradScale` multiplies dLoss/dlogits: 1/n for a mean over this batch, 1/globalBatch when
   * several devices' or micro-batches' gradients are summed. `targets`: the batch's regression
   * values or multi-hot labels (losses other than softmaxCrossEntropy).
   */
  computeGradients(
    this: Replica<Sequential>,
    images: Float32Array,
    labels: Int32Array,
    ctx: ForwardContext,
    gradScale: number,
    onGradientsReady?: (offset: number) => void,
    targets?: Float32Array,
  ): StepResult {
    const n = images.length / shapeSize(this.model.inputShape);
    const logits = this.model.forward(this.batchTensor(images, n), { ...ctx, training: true });
    const { lossSum, correct, dlogits } = this.loss.compute(logits, labels, gradScale, targets);
    this.model.backward(dlogits, onGradientsReady);
    return { lossSum, correct, samples: n };
  }

  /**
   * What the training loop runs: computeGradients in `config.train.microBatches` sequential slices
   * (gradients accumulate; see accumulateMicroBatches), through the model's async passes so layers
   * that communicate (synchronised BatchNorm, a model-parallel section) can. An empty batch still
   * runs when layers communicate, so every device takes part in their collectives. `images` are
   * this device's rows of a step of `globalBatchSize` samples (a model-parallel section computes on
   * all of them); `gradScale` is the data-parallel one, a split model rescales its shards' itself.
   */
  async computeGradientsAsync(
    images: Float32Array,
    labels: Int32Array,
    ctx: ForwardContext,
    gradScale: number,
    onGradientsReady?: (offset: number) => void,
    globalBatchSize?: number,
    targets?: Float32Array,
    sequence?: SequenceBatch,
  ): Promise<StepResult> {
    this.residence?.beginStep();
    // a device among several: each bucket comes to the host as soon as the GPU has computed it
    const onReady =
      onGradientsReady && this.residence ? this.residence.readBuckets(onGradientsReady) : onGradientsReady;
    // a sequence batch: [n, T, F] with per-sample lengths, labels padded [n, S]
    const x = sequence
      ? this.batchTensor(images, sequence.lengths.length, sequence.frames)
      : this.batchTensor(images, images.length / shapeSize(this.model.inputShape));
    // a pipeline stage runs the step's micro-batches itself
    const { microBatches } = this.config.train;
    // a tensor-parallel group's section computes its members' rows (tensorGroups.ts)
    const globalBatch = this.groups?.groupBatch(globalBatchSize) ?? globalBatchSize;
    const step = { x, labels, targets, sequence, ctx: { ...ctx, training: true, globalBatch } };
    if (this.model.runStep)
      return this.model.runStep({ ...step, gradScale, microBatches, loss: this.loss, onGradientsReady });
    const result = await accumulateMicroBatches(
      this.model,
      this.loss,
      x,
      labels,
      step.ctx,
      gradScale,
      this.config.train.microBatches,
      onReady,
      targets,
      sequence,
      this.residence?.loss,
    );
    if (this.residence) {
      const sums = await this.residence.endStep(this.config.train.clipGradNorm !== undefined, this.frozen);
      result.lossSum += sums.lossSum;
      result.correct += sums.correct;
    }
    // the groups' copies of a shard each saw their group's samples: their mean is the job's gradient
    await this.groups?.data.allreduce(this.shardGrads(), 'mean');
    return result;
  }

  /**
   * On a GPU: the host's weights and statistics (which the optimizer, strategies and checkpoints
   * changed) become the device's, before a step or an evaluation. Nothing on a CPU.
   */
  weightsToDevice(): void {
    this.residence?.weightsToDevice();
  }

  /** The host changed the weights, statistics or optimizer state (a load, a swap): a GPU takes them before its next use. */
  weightsChanged(): void {
    this.residence?.weightsChanged();
  }

  /** The host's copies of weights, statistics and optimizer state are current after this (a GPU's step left them behind). */
  async hostCopies(): Promise<void> {
    await this.residence?.toHost();
  }

  /** Where this device's step on `batch` first holds a NaN/Inf (see nonFiniteProbe.ts). */
  locateNonFinite(batch: ProbeBatch): Promise<string | null> {
    return locateNonFinite(this, batch);
  }
}
