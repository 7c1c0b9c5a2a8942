import type { Communicator } from '../../comm/communicator.ts';
import type { Backend } from '../../kernels/backend.ts';
import { Tensor } from '../../tensor/tensor.ts';
import { BufferPool, type ForwardContext } from '../../nn/layer.ts';
import { AttentionHeads, type HeadsSaved } from '../../nn/attentionHeads.ts';
import { keepLengths } from '../../nn/sequence.ts';
import { allreduceSum, CollectiveBuffers, sectionRows } from './activationExchange.ts';
import { dropAttentionWeights } from './ownerDropout.ts';
import { SectionLayer } from './sectionLayer.ts';

/** One whole-array row for copyRows. */
const WHOLE = new Int32Array(1);

/**
 * This device's heads of a multi-head self-attention (nn/attention.ts, PyTorch's layout) over
 * every device's samples [N, T, D], Megatron-LM's split: the input projection is column-parallel
 * (the device's heads' rows of q, k and v: a [3·D/G, D] shard of in_proj_weight), each head's
 * attention is the device's own, the output projection is row-parallel (its heads' columns of
 * out_proj.weight) and its partial products are all-reduced before the replicated bias: ONE
 * all-reduce forward (Megatron's g). Backward's input gradient is likewise a partial sum over the
 * devices' heads, all-reduced once (Megatron's f). The input must be the same on every device.
 *
 * Weight gradients are scaled by `weightGradScale` (1/G; tensorParallel.ts says why), the
 * replicated out_proj.bias's too: every device then holds the unsplit model's gradient of it.
 * Attention-weight dropout draws each sample's masks as the device that owns it would
 * (ownerDropout.ts), these heads' part of them.
 */
export class HeadParallelAttention extends SectionLayer {
  readonly outputShape: readonly number[];
  readonly features: number;
  /** the heads on this device, and the width of their q (k, v) block: heads · headDim */
  readonly localHeads: number;
  readonly localWidth: number;
  private readonly headDim: number;
  private readonly pool: BufferPool;
  private readonly shared: CollectiveBuffers;
  /** everything between the two projections, for this device's heads */
  private readonly core: AttentionHeads;
  private wIn!: Float32Array;
  private bIn!: Float32Array;
  private wOut!: Float32Array;
  private bOut!: Float32Array;
  private dwIn!: Float32Array;
  private dbIn!: Float32Array;
  private dwOut!: Float32Array;
  private dbOut!: Float32Array;
  private saved: (HeadsSaved & { x: Tensor; lengths?: Int32Array }) | null = null;

  constructor(
    private readonly backend: Backend,
    private readonly comm: Communicator,
    readonly name: string,
    readonly inputShape: readonly number[],
    heads: number,
    causal: boolean,
    private readonly weightGradScale: number,
    /** attention-weight dropout: its rate and the unsplit attention's key */
    private readonly dropout: { rate: number; layerKey: number },
  ) {
    super();
    const D = inputShape[inputShape.length - 1]!;
    this.outputShape = inputShape;
    this.features = D;
    this.headDim = D / heads;
    this.localHeads = heads / comm.size;
    this.localWidth = this.localHeads * this.headDim;
    this.pool = new BufferPool(backend);
    this.shared = new CollectiveBuffers(backend, comm);
    this.core = new AttentionHeads(this.pool, this.localHeads, this.headDim, causal);
  }

  /** in_proj_weight, in_proj_bias, out_proj.weight (this device's shards) and out_proj.bias (whole) */
  override bind(params: Float32Array[], grads: Float32Array[]): void {
    [this.wIn, this.bIn, this.wOut, this.bOut] = params as [Float32Array, Float32Array, Float32Array, Float32Array];
    [this.dwIn, this.dbIn, this.dwOut, this.dbOut] = grads as [Float32Array, Float32Array, Float32Array, Float32Array];
  }

  savedForBackward(): readonly ArrayBufferView[] {
    const s = this.saved;
    return s ? [s.heads, s.probs, s.merged, ...(s.mask ? [s.mask, s.mixed] : [])] : [];
  }

  /** x: [N, T, D], every device's samples (the same on every device). Returns the attention's output [N, T, D]. */
  async forwardAsync(x: Tensor, ctx: ForwardContext): Promise<Tensor> {
    const b = this.backend,
      D = this.features,
      Dl = this.localWidth;
    const [N, T] = x.shape as [number, number, number];
    const rows = N * T,
      size = rows * Dl;
    const lengths = keepLengths(this.pool, ctx.lengths);

    // this device's q | k | v per frame (column-parallel in_proj), its heads' attention
    const qkv = this.pool.f32('qkv', 3 * size);
    b.gemm(false, true, rows, 3 * Dl, D, 1, x.data, this.wIn, 0, qkv);
    b.biasAdd(qkv, this.bIn, qkv, rows, 3 * Dl);
    if (lengths) b.zeroPadding(qkv, N, T, 3 * Dl, lengths);
    const heads = this.core.forward(b, qkv, N, T, lengths, (probs, g) => {
      if (!ctx.training || this.dropout.rate === 0) return { mixed: probs, mask: null };
      const mixed = this.pool.f32('mixed', probs.length);
      const mask = this.pool.f32('mask', probs.length);
      const member = this.comm.rank;
      const o = { ...this.dropout, h0: member * this.localHeads, heads: this.localHeads, T: g.T, member };
      dropAttentionWeights(b, probs, mixed, mask, o, ctx, sectionRows(ctx, this.comm.size));
      return { mixed, mask };
    });

    // row-parallel out_proj: partial products over this device's heads, summed over the devices
    const y = new Tensor(x.shape, await this.shared.get('y', rows * D));
    b.gemm(false, true, rows, D, Dl, 1, heads.merged, this.wOut, 0, y.data);
    await allreduceSum(this.comm, b.device, y.data);
    b.biasAdd(y.data, this.bOut, y.data, rows, D);
    if (lengths) b.zeroPadding(y.data, N, T, D, lengths);
    this.saved = { ...heads, x, lengths };
    return y;
  }

  /** dy: [N, T, D], the same on every device. Returns dL/dx (all-reduced over the devices' heads). */
  async backwardAsync(dy: Tensor, needInputGrad = true): Promise<Tensor | null> {
    const s = this.saved;
    if (!s) throw new Error(`${this.name}: backward before forward`);
    const b = this.backend,
      { g, lengths } = s,
      D = this.features,
      Dl = this.localWidth,
      scale = this.weightGradScale;
    const rows = g.N * g.T,
      size = rows * Dl;
    let dz = dy.data;
    if (lengths) {
      dz = this.pool.f32('dz', rows * D);
      b.copyRows(dy.data, WHOLE, dz, WHOLE, 1, rows * D, false);
      b.zeroPadding(dz, g.N, g.T, D, lengths);
    }
    b.gemm(true, false, D, Dl, rows, scale, dz, s.merged, 1, this.dwOut);
    this.biasGrad(dz, this.dbOut, rows, D);
    const dmerged = this.pool.f32('dmerged', size);
    b.gemm(false, false, rows, Dl, D, 1, dz, this.wOut, 0, dmerged);
    const dqkv = this.core.backward(b, s, dmerged);
    b.gemm(true, false, 3 * Dl, D, rows, scale, dqkv, s.x.data, 1, this.dwIn);
    this.biasGrad(dqkv, this.dbIn, rows, 3 * Dl);
    if (!needInputGrad) return null;
    // the heads' partial input gradients, summed over the devices
    const dx = new Tensor(s.x.shape, await this.shared.get('dx', rows * D));
    b.gemm(false, false, rows, D, 3 * Dl, 1, dqkv, this.wIn, 0, dx.data);
    await allreduceSum(this.comm, b.device, dx.data);
    return dx;
  }

  /** db += weightGradScale · Σ_rows dz */
  private biasGrad(dz: Float32Array, db: Float32Array, rows: number, cols: number): void {
    const tmp = this.pool.f32(`db${cols}`, cols);
    this.backend.fill(tmp, 0);
    this.backend.biasGrad(dz, tmp, rows, cols);
    this.backend.axpy(this.weightGradScale, tmp, db);
  }
}
