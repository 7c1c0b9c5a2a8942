import { Tensor } from '../tensor/tensor.ts';
import { shapeSize } from '../tensor/shape.ts';
import { CounterRng } from '../tensor/rng.ts';
import type { Backend } from '../kernels/backend.ts';
import { BaseLayer, type ForwardContext } from './layer.ts';
import type { DropoutMasks } from './spec.ts';
import { isSequenceShape, validFrames } from './sequence.ts';

/**
 * Inverted dropout. Where the keep/drop draw for element j of a sample comes from:
 * - `per-replica` (the default, as neon does): keyed by (seed, step, layer, rank, index of the
 *   sample in this replica's batch): each replica draws its own masks, independent of micro-batching;
 * - `per-sample`: keyed by (seed, step, layer, GLOBAL sample index), so the mask a sample gets does
 *   not depend on how the batch was split across devices or micro-batches (a split run equals the
 *   serial one exactly).
 * A tensor-parallel shard (`features`) holds the features [offset, offset + width) of samples with
 * `total` features, so each feature keeps the draw it has in the unsplit layer.
 * On a sequence [T, F] each sample has its own stream (keyed as above, plus the sample), element
 * (t, j) at position t·F + j, so a mask does not depend on the batch's padded T; frames past a
 * sample's length (ForwardContext.lengths) are dropped (0).
 */
export class Dropout extends BaseLayer {
  readonly outputShape: readonly number[];
  private readonly perSample: number;
  private readonly featureOffset: number;
  private readonly featuresPerSample: number;
  private mask: Float32Array | null = null;

  constructor(
    backend: Backend,
    name: string,
    inputShape: readonly number[],
    readonly rate: number,
    private readonly layerKey: number,
    readonly masks: DropoutMasks = 'per-replica',
    features?: { offset: number; total: number },
  ) {
    super(backend, name, inputShape);
    if (!(rate >= 0 && rate < 1)) throw this.error(`rate must be in [0, 1), got ${rate}`);
    this.outputShape = inputShape;
    this.perSample = shapeSize(inputShape);
    this.featureOffset = features?.offset ?? 0;
    this.featuresPerSample = features?.total ?? this.perSample;
    if (this.featureOffset + this.perSample > this.featuresPerSample) {
      throw this.error(
        `features [${this.featureOffset}, ${this.featureOffset + this.perSample}) lie outside a sample of ${this.featuresPerSample}`,
      );
    }
  }

  forward(x: Tensor, ctx: ForwardContext): Tensor {
    if (!ctx.training || this.rate === 0) {
      this.mask = null;
      return x;
    }
    const mask = this.buffer('mask', x.size);
    const y = new Tensor(x.shape, this.buffer('y', x.size));
    const keep = 1 - this.rate,
      scale = 1 / keep;
    const perSample = this.masks === 'per-sample';
    // distinct stream constants keep the two schemes' draws unrelated
    const rng = perSample
      ? new CounterRng(ctx.seed, ctx.step, this.layerKey, 0xd209)
      : new CounterRng(ctx.seed, ctx.step, this.layerKey, 0x7e91, ctx.rank ?? 0);
    const first = perSample ? ctx.sampleOffset : (ctx.localOffset ?? 0);
    if (isSequenceShape(this.inputShape) && x.shape.length === 3) {
      this.maskSequence(x, ctx, first, mask, y.data);
      this.mask = mask;
      return y;
    }
    const per = this.perSample,
      [k0, k1] = rng.key;
    if (per === this.featuresPerSample) {
      // whole samples: the batch's draws are one run of the stream, from the first sample's
      this.backend.dropoutForward(k0, k1, first * per, x.size, keep, scale, x.data, mask, y.data);
      this.mask = mask;
      return y;
    }
    for (let n = 0; n < x.batch; n++) {
      // sample n's features are its own run of the stream (the backend draws them)
      const base = (first + n) * this.featuresPerSample + this.featureOffset,
        i = n * per;
      this.backend.dropoutForward(
        k0,
        k1,
        base,
        per,
        keep,
        scale,
        x.data.subarray(i, i + per),
        mask.subarray(i, i + per),
        y.data.subarray(i, i + per),
      );
    }
    this.mask = mask;
    return y;
  }

  /** Sequence masks: one stream per sample, position t·F + j; 0 at padded frames. */
  private maskSequence(x: Tensor, ctx: ForwardContext, first: number, mask: Float32Array, y: Float32Array): void {
    const [N, T, F] = x.shape as [number, number, number];
    const keep = 1 - this.rate,
      scale = 1 / keep;
    const lengths = new Int32Array(N);
    for (let n = 0; n < N; n++) {
      const rng =
        this.masks === 'per-sample'
          ? new CounterRng(ctx.seed, ctx.step, this.layerKey, 0x5e91, first + n)
          : new CounterRng(ctx.seed, ctx.step, this.layerKey, 0x5e92, ctx.rank ?? 0, first + n);
      const len = (lengths[n] = validFrames(ctx.lengths, n, T)),
        base = n * T * F,
        valid = len * F,
        [k0, k1] = rng.key;
      this.backend.dropoutForward(
        k0,
        k1,
        0,
        valid,
        keep,
        scale,
        x.data.subarray(base, base + valid),
        mask.subarray(base, base + valid),
        y.subarray(base, base + valid),
      );
    }
    // padded frames: zero mask and output (kernels, so that they are zero where the arrays live)
    if (ctx.lengths) {
      this.backend.zeroPadding(mask, N, T, F, lengths);
      this.backend.zeroPadding(y, N, T, F, lengths);
    }
  }

  savedForBackward(): readonly ArrayBufferView[] {
    return this.mask ? [this.mask] : [];
  }

  backward(dy: Tensor): Tensor {
    if (!this.mask) return dy;
    const dx = new Tensor(dy.shape, this.buffer('dx', dy.size));
    this.backend.dropoutBackward(dy.data, this.mask, dx.data, dx.size);
    return dx;
  }
}
