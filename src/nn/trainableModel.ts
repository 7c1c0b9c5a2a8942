import type { Tensor } from '../tensor/tensor.ts';
import type { ForwardContext } from './layer.ts';
import type { FlatEntry } from './flatLayout.ts';
import type { DeviceStorage } from '../kernels/deviceStorage.ts';
import type { Loss } from './loss.ts';

/**
 * Told that replicated grads[offset:] are final during backward. A Promise it returns is awaited
 * before the next layer (an async pass only: the synchronous one goes straight on); any other
 * value is ignored.
 */
export type GradientsReady = (offset: number) => unknown;

/** Where a split model assembles the unsplit one (on rank 0): buffers laid out like the unsplit params, and its state. */
export interface WholeModelTarget {
  /** one per source buffer (params, optimizer buffers), in the unsplit layout `paramEntries` */
  buffers: Float32Array[];
  paramEntries: readonly FlatEntry[];
  state: Float32Array;
  stateEntries: readonly FlatEntry[];
}

/**
 * What a replica trains: the whole model (`Sequential`) or one device's part of a model split
 * over devices (the model-parallel net). Parameters, gradients and state are flat buffers; the
 * first `replicatedLength` floats of params and grads are the same on every device (what a
 * data-parallel strategy averages), the rest — only in a split model — is this device's shard,
 * whose gradient is already the whole batch's.
 */
export interface TrainableModel {
  /** where its arrays live when a GPU backend holds them (the host reads them only through it); absent on a CPU */
  readonly device?: DeviceStorage;
  readonly params: Float32Array;
  readonly grads: Float32Array;
  readonly state: Float32Array;
  readonly replicatedLength: number;
  /** per-sample input and output shapes (without the batch dimension) */
  readonly inputShape: readonly number[];
  readonly outputShape: readonly number[];
  /** true when some layer communicates in training: every device runs every step, even without samples */
  readonly needsAsync: boolean;
  zeroGrads(): void;
  forwardAsync(x: Tensor, ctx: ForwardContext): Promise<Tensor>;
  /**
   * Back-propagates dL/doutput, accumulating into grads; `onReady(offset)` says replicated
   * grads[offset:] are final, in the same order on every device. A Promise it returns is awaited
   * before the next layer (a turn of the event loop, so buckets in flight move during backward).
   */
  backwardAsync(dy: Tensor, onReady?: GradientsReady): Promise<void>;
  /**
   * The offsets backwardAsync passes to `onReady`, in that order. A device that skips a step (no
   * samples) announces them too, so bucketed reductions make the same calls on every device.
   */
  readonly gradientReadyOffsets: readonly number[];
  /** the most bytes of activations held for backward since the last call (then reset) */
  takePeakActivationBytes(): number;
  /** a sequence model: the output's valid frames per sample from the input's (layers that shorten time map them) */
  outputLengths?(lengths: Int32Array): Int32Array;
  /**
   * Only a model split over devices has it. Collective (every device calls it): assembles the
   * unsplit model on rank 0 — each of `sources` (laid out like params: the params, optimizer
   * buffers) into the matching `into.buffers`, and the state; `into` is null on other ranks.
   */
  gatherWhole?(sources: Float32Array[], into: WholeModelTarget | null): Promise<void>;
  /**
   * Only a pipeline stage has it: the whole step — every micro-batch's forward, loss and backward,
   * streamed through the pipeline's devices — instead of forwardAsync/backwardAsync, accumulating
   * into grads. Every stage is given the step's batch; the loss sums come from the last stage
   * (the others report no samples, so a pipeline's step counts once).
   */
  runStep?(step: PipelineStepInput): Promise<StepSums>;
}

/** A pipelined step's inputs (see TrainableModel.runStep). */
export interface PipelineStepInput {
  x: Tensor;
  labels: Int32Array;
  targets: Float32Array | undefined;
  /** a sequence batch (a pipeline refuses one: its activations have per-sample lengths) */
  sequence: unknown;
  ctx: ForwardContext;
  gradScale: number;
  microBatches: number;
  loss: Loss;
  /** told every gradient offset once the step's last backward has ended */
  onGradientsReady: GradientsReady | undefined;
}

/** A step's loss sums over the samples it reports. */
export interface StepSums {
  lossSum: number;
  correct: number;
  samples: number;
  absErrorSum?: number;
  exactMatches?: number;
}
