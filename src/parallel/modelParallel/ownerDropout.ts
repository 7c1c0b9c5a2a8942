import type { Backend } from '../../kernels/backend.ts';
import { Tensor } from '../../tensor/tensor.ts';
import { CounterRng } from '../../tensor/rng.ts';
import type { Dropout } from '../../nn/dropout.ts';
import { BufferPool, type ForwardContext } from '../../nn/layer.ts';
import type { RowSplit } from './activationExchange.ts';
import { DeviceCopies } from './deviceCopies.ts';

/**
 * Dropout inside a section that computes on every device's samples, with the masks the
 * data-parallel run draws: each sample's mask is keyed as its own device keys it (that device's
 * rank, the sample's index in its batch), so splitting a layer does not change which units a
 * per-replica mask drops. Every device draws the same masks for the whole batch (the activations
 * it drops are the same everywhere). The section's devices are consecutive ranks of the job
 * (ctx.rank is this device's), so member q of the section is rank ctx.rank − rank + q.
 */
export class OwnerKeyedDropout {
  private readonly pool: BufferPool;
  private readonly copies: DeviceCopies;
  private mask: Float32Array | null = null;

  /** `layer`: the unsplit model's dropout, run on each device's rows in turn */
  constructor(
    private readonly backend: Backend,
    private readonly layer: Dropout,
  ) {
    this.pool = new BufferPool(backend);
    this.copies = new DeviceCopies(backend);
  }

  /** x: [N, T, D], every device's samples in rank order (`rows`); ctx as the section's layers get it (this device's offsets). */
  forward(x: Tensor, ctx: ForwardContext, rows: RowSplit, rank: number): Tensor {
    if (!ctx.training || this.layer.rate === 0) {
      this.mask = null;
      return x;
    }
    const per = x.size / Math.max(x.batch, 1);
    const y = new Tensor(x.shape, this.pool.f32('y', x.size)),
      mask = this.pool.f32('mask', x.size);
    const batchStart = ctx.sampleOffset - rows.starts[rank]!,
      firstRank = (ctx.rank ?? rank) - rank;
    for (let q = 0; q < rows.counts.length; q++) {
      const n = rows.counts[q]!,
        at = rows.starts[q]! * per;
      if (n === 0) continue;
      const part = new Tensor([n, ...x.shape.slice(1)], x.data.subarray(at, at + n * per));
      const out = this.layer.forward(part, {
        ...ctx,
        rank: firstRank + q,
        localOffset: 0,
        sampleOffset: batchStart + rows.starts[q]!,
        lengths: ctx.lengths?.subarray(rows.starts[q]!, rows.starts[q]! + n),
      });
      this.copies.whole(out.data, y.data, at);
      this.copies.whole(this.layer.savedForBackward()[0] as Float32Array, mask, at);
    }
    this.mask = mask;
    return y;
  }

  backward(dy: Tensor): Tensor {
    if (!this.mask) return dy;
    const dx = new Tensor(dy.shape, this.pool.f32('dx', dy.size));
    this.backend.dropoutBackward(dy.data, this.mask, dx.data, dx.size);
    return dx;
  }

  savedForBackward(): readonly ArrayBufferView[] {
    return this.mask ? [this.mask] : [];
  }
}

/**
 * The attention-weight dropout of a device's heads [h0, h0 + heads) for every device's samples:
 * sample n's weights are one stream of draws [allHeads, T, T] keyed as nn/attention.ts keys them on
 * the device that owns n (its rank, n's index there), of which these heads take their part.
 * `member`: this device's place in the section (its ranks consecutive, as for OwnerKeyedDropout).
 */
export function dropAttentionWeights(
  backend: Backend,
  probs: Float32Array,
  mixed: Float32Array,
  mask: Float32Array,
  o: { rate: number; layerKey: number; h0: number; heads: number; T: number; member: number },
  ctx: ForwardContext,
  rows: RowSplit,
): void {
  const keep = 1 - o.rate,
    square = o.T * o.T,
    per = o.heads * square,
    firstRank = (ctx.rank ?? o.member) - o.member;
  for (let q = 0; q < rows.counts.length; q++) {
    for (let j = 0; j < rows.counts[q]!; j++) {
      const n = rows.starts[q]! + j,
        at = n * per;
      // (seed, step, layer, 0xa77e, rank, index in the device's batch): Attention's dropWeights key
      const [k0, k1] = new CounterRng(ctx.seed, ctx.step, o.layerKey, 0xa77e, firstRank + q, j).key;
      backend.dropoutForward(
        k0,
        k1,
        o.h0 * square,
        per,
        keep,
        1 / keep,
        probs.subarray(at, at + per),
        mask.subarray(at, at + per),
        mixed.subarray(at, at + per),
      );
    }
  }
}
