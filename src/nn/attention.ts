import { Tensor } from '../tensor/tensor.ts';
import { formatShape } from '../tensor/shape.ts';
import { CounterRng } from '../tensor/rng.ts';
import type { AttentionGeometry } from '../kernels/attentionKernels.ts';
import type { Backend } from '../kernels/backend.ts';
import { BaseLayer, type ForwardContext, type ParamSpec } from './layer.ts';
import { isSequenceShape, keepLengths } from './sequence.ts';
import { AttentionHeads, type HeadsSaved } from './attentionHeads.ts';

export interface AttentionOptions {
  heads: number;
  /** query t sees frames 0…t only */
  causal: boolean;
  /** probability of dropping an attention weight while training (0: none) */
  dropout: number;
}

/** What a training forward keeps for backward. */
interface Saved extends HeadsSaved {
  x: Tensor;
  lengths: Int32Array | undefined;
}

/** One whole-array row for copyRows. */
const WHOLE = new Int32Array(1);

/**
 * Multi-head scaled dot-product self-attention over a sequence [T, D], PyTorch's
 * nn.MultiheadAttention(D, heads, batch_first=True) with query = key = value = x: one input
 * projection to Q | K | V, softmax(Q·Kᵀ/√(D/heads)) per head (row maximum subtracted), the heads'
 * outputs side by side, one output projection. Parameters are PyTorch's, by name and layout
 * ([out, in], as lstm/gru and unlike dense's [in, out] kernel): in_proj_weight [3D, D],
 * in_proj_bias [3D], out_proj.weight [D, D], out_proj.bias [D]. `causal`: frame t attends to frames
 * 0…t. Padded frames (ForwardContext.lengths) are never attended to and output 0.
 */
export class Attention extends BaseLayer {
  readonly outputShape: readonly number[];
  readonly features: number;
  readonly heads: number;
  readonly headDim: number;
  readonly causal: boolean;
  readonly dropout: number;
  /** everything between the two projections */
  private readonly core: AttentionHeads;
  private wIn!: Float32Array;
  private bIn!: Float32Array;
  private wOut!: Float32Array;
  private bOut!: Float32Array;
  private dwIn!: Float32Array;
  private dbIn!: Float32Array;
  private dwOut!: Float32Array;
  private dbOut!: Float32Array;
  private saved: Saved | null = null;

  constructor(
    backend: Backend,
    name: string,
    inputShape: readonly number[],
    options: AttentionOptions,
    /** keys this layer's dropout masks (its index in the model, or a nested key) */
    readonly layerKey: number,
  ) {
    super(backend, name, inputShape);
    if (!isSequenceShape(inputShape)) {
      throw this.error(
        `expects a sequence [frames, features] but receives shape ${formatShape(inputShape)}; ` +
          'put it after a layer that gives one vector per frame (an embedding, a dense layer on a sequence)',
      );
    }
    const D = inputShape[1]!;
    const { heads, causal, dropout } = options;
    if (!Number.isInteger(heads) || heads < 1 || D % heads !== 0) {
      throw this.error(
        `heads: ${heads} does not divide the ${D} features (each head takes D/heads of them); ` +
          `use heads: ${divisors(D).join(', ')}, or change the width before this layer`,
      );
    }
    if (!(dropout >= 0 && dropout < 1)) throw this.error(`dropout must be in [0, 1), got ${dropout}`);
    this.outputShape = inputShape;
    this.features = D;
    this.heads = heads;
    this.headDim = D / heads;
    this.causal = causal;
    this.dropout = dropout;
    this.core = new AttentionHeads(this.pool, heads, this.headDim, causal);
  }

  /**
   * PyTorch's initialisation: xavier_uniform on in_proj_weight (fan-in D, fan-out 3D), zero biases,
   * and out_proj.weight as nn.Linear's default U(−1/√D, 1/√D) (rnnUniform with fanOut = D is that bound).
   */
  override params(): ParamSpec[] {
    const D = this.features;
    return [
      { name: 'in_proj_weight', shape: [3 * D, D], init: 'glorotUniform', fanIn: D, fanOut: 3 * D },
      { name: 'in_proj_bias', shape: [3 * D], init: 'zeros', fanIn: D, fanOut: 3 * D },
      { name: 'out_proj.weight', shape: [D, D], init: 'rnnUniform', fanIn: D, fanOut: D },
      { name: 'out_proj.bias', shape: [D], init: 'zeros', fanIn: D, fanOut: D },
    ];
  }

  override bind(params: Float32Array[], grads: Float32Array[]): void {
    [this.wIn, this.bIn, this.wOut, this.bOut] = params as [Float32Array, Float32Array, Float32Array, Float32Array];
    [this.dwIn, this.dbIn, this.dwOut, this.dbOut] = grads as [Float32Array, Float32Array, Float32Array, Float32Array];
  }

  forward(x: Tensor, ctx: ForwardContext): Tensor {
    if (x.shape.length !== 3 || x.shape[2] !== this.features)
      throw this.error(`expects input [N, T, ${this.features}], got ${formatShape(x.shape)}`);
    const b = this.backend;
    const [N, T, D] = x.shape as [number, number, number];
    const rows = N * T,
      size = rows * D;
    const lengths = keepLengths(this.pool, ctx.lengths);

    // Q | K | V per frame; padded frames zeroed, so nothing they held reaches a valid output
    const qkv = this.buffer('qkv', 3 * size);
    b.gemm(false, true, rows, 3 * D, D, 1, x.data, this.wIn, 0, qkv);
    b.biasAdd(qkv, this.bIn, qkv, rows, 3 * D);
    if (lengths) b.zeroPadding(qkv, N, T, 3 * D, lengths);
    const heads = this.core.forward(b, qkv, N, T, lengths, (probs, g) => this.dropWeights(probs, g, ctx));
    const y = new Tensor(x.shape, this.buffer('y', size));
    b.gemm(false, true, rows, D, D, 1, heads.merged, this.wOut, 0, y.data);
    b.biasAdd(y.data, this.bOut, y.data, rows, D);
    if (lengths) b.zeroPadding(y.data, N, T, D, lengths);
    this.saved = { ...heads, x, lengths };
    return y;
  }

  /**
   * Inverted dropout of the attention weights while training: sample n's weights [heads, T, T] are
   * one stream of the counter-based draws keyed (seed, step, layer, rank, index of the sample in
   * this replica's batch), as the dropout layer's per-replica masks. Masked weights stay 0.
   */
  private dropWeights(
    probs: Float32Array,
    g: AttentionGeometry,
    ctx: ForwardContext,
  ): { mixed: Float32Array; mask: Float32Array | null } {
    if (!ctx.training || this.dropout === 0) return { mixed: probs, mask: null };
    const per = g.heads * g.T * g.T,
      keep = 1 - this.dropout;
    const mask = this.buffer('mask', probs.length);
    const mixed = this.buffer('mixed', probs.length);
    const first = ctx.localOffset ?? 0;
    for (let n = 0; n < g.N; n++) {
      const [k0, k1] = new CounterRng(ctx.seed, ctx.step, this.layerKey, 0xa77e, ctx.rank ?? 0, first + n).key;
      const at = n * per;
      this.backend.dropoutForward(
        k0,
        k1,
        0,
        per,
        keep,
        1 / keep,
        probs.subarray(at, at + per),
        mask.subarray(at, at + per),
        mixed.subarray(at, at + per),
      );
    }
    return { mixed, mask };
  }

  savedForBackward(): readonly ArrayBufferView[] {
    const s = this.saved;
    if (!s) return [];
    return [s.x.data, s.heads, s.probs, s.merged, ...(s.mask ? [s.mask, s.mixed] : [])];
  }

  backward(dy: Tensor, needInputGrad = true): Tensor | null {
    const s = this.saved;
    if (!s) throw this.error('backward before forward');
    const b = this.backend,
      { g, lengths } = s;
    const D = this.features,
      rows = g.N * g.T,
      size = rows * D;
    // padded frames' outputs are constant zeros: their gradient is dropped (dy itself is left as it is)
    let dz = dy.data;
    if (lengths) {
      dz = this.buffer('dz', size);
      b.copyRows(dy.data, WHOLE, dz, WHOLE, 1, size, false);
      b.zeroPadding(dz, g.N, g.T, D, lengths);
    }
    b.gemm(true, false, D, D, rows, 1, dz, s.merged, 1, this.dwOut);
    b.biasGrad(dz, this.dbOut, rows, D);
    const dmerged = this.buffer('dmerged', size);
    b.gemm(false, false, rows, D, D, 1, dz, this.wOut, 0, dmerged);
    const dqkv = this.core.backward(b, s, dmerged);
    b.gemm(true, false, 3 * D, D, rows, 1, dqkv, s.x.data, 1, this.dwIn);
    b.biasGrad(dqkv, this.dbIn, rows, 3 * D);
    if (!needInputGrad) return null;
    const dx = new Tensor(s.x.shape, this.buffer('dx', size));
    b.gemm(false, false, rows, D, 3 * D, 1, dqkv, this.wIn, 0, dx.data);
    return dx;
  }
}

/** The head counts that divide D, for the error message. */
function divisors(D: number): number[] {
  const all: number[] = [];
  for (let h = 1; h <= D && all.length < 8; h++) if (D % h === 0) all.push(h);
  return all;
}
