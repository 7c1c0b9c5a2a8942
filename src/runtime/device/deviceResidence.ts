import type { Backend } from '../../kernels/backend.ts';
import type { DeviceStorage } from '../../kernels/deviceStorage.ts';
import type { DeviceLoss, Loss } from '../../nn/loss.ts';
import type { TrainableModel } from '../../nn/trainableModel.ts';
import type { FlatRange } from '../../optim/optimizer.ts';

/** The step's numbers read from the device: [loss sum, correct, non-finite flag, squared gradient norm]. */
const LOSS = 0,
  CORRECT = 1,
  NON_FINITE = 2,
  SQUARES = 3;

/**
 * What crosses between the host and a device (a GPU) in a replica's steps, and when.
 *
 * - Towers (a device among several, DeepSpeech's shape): the host keeps the weights, which go to
 *   the device before each step; the gradients come back bucket by bucket as backward produces
 *   them (the strategy reduces each while the GPU goes on), and the step's last read brings the
 *   rest with the statistics and the loss's sums, for the host's optimizer.
 * - Resident (the job's only device): weights, gradients and optimizer state stay on the device,
 *   where the optimizer steps. The step's one read is four numbers: the loss's two sums, whether
 *   the gradient holds a NaN/Inf, and its squared norm (for clipping). The host's copies follow
 *   when asked (`toHost`: checkpoints, evaluation), the device's when the host changed them.
 *
 * Where the loss has no device form (CTC, MSE, label smoothing) its outputs are read once more.
 */
export class DeviceResidence {
  private readonly sums: Float32Array;
  /** the loss on the device, its sums in `sums`; null: the loss runs on the host from the outputs */
  readonly loss: DeviceLoss | null;
  /** the host changed weights, statistics or optimizer state the device has not yet taken */
  private hostAhead = true;
  /** a resident step changed the device's arrays since the host's copies were last brought up to date */
  private deviceAhead = false;
  private readonly device: DeviceStorage;
  /** towers: replicated gradients [0, unread) are not yet on the host this step; the buckets read so far */
  private unread = 0;
  private buckets: Promise<void> = Promise.resolve();

  constructor(
    private readonly backend: Backend,
    private readonly model: TrainableModel,
    loss: Loss,
    /** the job's only device: everything stays on it */
    readonly resident: boolean,
    /** the optimizer's state arrays (resident: on the device too) */
    private readonly optimizerState: () => Float32Array[],
  ) {
    this.device = backend.device!;
    this.sums = backend.alloc(4);
    this.loss = loss.onDevice?.(backend, this.sums) ?? null;
  }

  /** Before a step or an evaluation: the host's weights go to the device (resident: only when the host changed them). */
  weightsToDevice(): void {
    if (this.resident && !this.hostAhead) return;
    const { params, state } = this.model;
    this.device.fromHost([params, state, ...(this.resident ? this.optimizerState() : [])]);
    this.hostAhead = false;
  }

  /** The host changed the weights or the optimizer's state (a checkpoint loaded, an evaluation's swap). */
  weightsChanged(): void {
    this.hostAhead = true;
  }

  /** Before forward: the device has the weights and the step's sums start from zero. */
  beginStep(): void {
    this.weightsToDevice();
    this.backend.fill(this.sums, 0);
    // a split model's shards follow its replicated part; only the latter goes out in buckets
    this.unread = this.model.replicatedLength;
    this.buckets = Promise.resolve();
  }

  /**
   * A device among several: `onReady` (the strategy's bucketed reduction) wrapped so that each
   * bucket backward finishes is read at once — the GPU computes up to it while the host records
   * the rest of backward — and handed to the strategy when it is on the host, in backward's order,
   * so that the reduction overlaps the rest of backward. endStep reads only what is left.
   */
  readBuckets(onReady: (offset: number) => void): (offset: number) => void {
    return (offset) => {
      const read = this.device.toHost([this.model.grads.subarray(offset, this.unread)]);
      this.unread = offset;
      this.buckets = Promise.all([this.buckets, read]).then(() => onReady(offset));
      // awaited by endStep; a step that throws before it must not leave the rejection unhandled
      this.buckets.catch(() => {});
    };
  }

  /**
   * After backward, the step's one read; returns the loss's sums (zeros when the loss ran on the
   * host). Resident: the guards' numbers are computed first — the non-finite flag over the whole
   * gradient, then (clipping) the squared norm without the frozen ranges, zeroed as on the host.
   */
  async endStep(clip: boolean, frozen: readonly FlatRange[]): Promise<{ lossSum: number; correct: number }> {
    const { grads, state } = this.model;
    if (this.resident) {
      const kernels = this.device.stepKernels;
      kernels.anyNonFinite([grads], this.sums.subarray(NON_FINITE, NON_FINITE + 1));
      if (clip) {
        for (const f of frozen) if (f.start < grads.length) this.backend.fill(grads.subarray(f.start, f.end), 0);
        kernels.sumOfSquares([grads], this.sums.subarray(SQUARES, SQUARES + 1));
      }
      await this.device.toHost([this.sums]);
      this.deviceAhead = true;
    } else {
      const shards = grads.subarray(this.model.replicatedLength);
      await this.device.toHost([grads.subarray(0, this.unread), shards, state, this.sums]);
      await this.buckets;
    }
    return { lossSum: this.sums[LOSS]!, correct: this.sums[CORRECT]! };
  }

  /** Resident: whether the last step's gradient was finite (read with the step). */
  gradientsFinite(): boolean {
    return this.sums[NON_FINITE] === 0;
  }

  /** Resident, clipping: the last step's squared gradient norm (read with the step). */
  squaredNorm(): number {
    return this.sums[SQUARES]!;
  }

  /** The host's copies of the weights, statistics and optimizer state, current after this (one read). */
  async toHost(): Promise<void> {
    if (!this.deviceAhead) return;
    const { params, state } = this.model;
    await this.device.toHost([params, state, ...this.optimizerState()]);
    this.deviceAhead = false;
  }
}
