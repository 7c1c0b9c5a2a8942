import type { AttentionGeometry } from '../kernels/attentionKernels.ts';
import type { Backend } from '../kernels/backend.ts';
import type { BufferPool } from './layer.ts';

/**
 * copyRows starts between frames [N, T, parts·D] (each frame's parts side by side, each part its
 * heads side by side: PyTorch's in_proj output q | k | v) and head-major [parts, N, heads, T, headDim]:
 * row r, `headDim` wide, goes from `frames[r]` to `heads[r]` (and back for the reverse copy).
 */
export class HeadRows {
  private key = '';
  private frameStarts: Int32Array = new Int32Array(0);
  private headStarts: Int32Array = new Int32Array(0);

  constructor(
    private readonly pool: BufferPool,
    private readonly name: string,
    private readonly parts: number,
    private readonly heads: number,
    private readonly headDim: number,
  ) {}

  /** The starts for a batch of N samples of T frames (rebuilt only when N or T changes). */
  starts(N: number, T: number): { frames: Int32Array; heads: Int32Array; count: number } {
    const { parts, heads: H, headDim: dh } = this;
    const count = parts * N * H * T;
    if (this.key !== `${N}×${T}`) {
      this.key = `${N}×${T}`;
      this.frameStarts = this.pool.i32(`${this.name}Frames`, count);
      this.headStarts = this.pool.i32(`${this.name}Heads`, count);
      const D = H * dh;
      let r = 0;
      for (let p = 0; p < parts; p++)
        for (let n = 0; n < N; n++)
          for (let h = 0; h < H; h++)
            for (let t = 0; t < T; t++, r++) {
              this.frameStarts[r] = (n * T + t) * parts * D + p * D + h * dh;
              this.headStarts[r] = r * dh;
            }
    }
    return { frames: this.frameStarts, heads: this.headStarts, count };
  }
}

/** What the heads' part of a training forward keeps for backward. */
export interface HeadsSaved {
  g: AttentionGeometry;
  /** q | k | v, each [N, heads, T, headDim] */
  heads: Float32Array;
  probs: Float32Array;
  /** the weights the values were mixed with: probs, or probs with dropout */
  mixed: Float32Array;
  mask: Float32Array | null;
  /** the heads' outputs back in frames [N·T, heads·headDim]: the output projection's input */
  merged: Float32Array;
}

/** Turns the softmax weights into the ones that mix the values (dropout while training), with its mask. */
export type WeightDropout = (
  probs: Float32Array,
  g: AttentionGeometry,
) => { mixed: Float32Array; mask: Float32Array | null };

/**
 * Attention between its two projections, for `heads` heads of `headDim` (all of a layer's, or one
 * device's share of them): q | k | v per frame to head-major rows, softmax(q·kᵀ/√headDim) with the
 * masks, the weights (after `drop`) mixing v, the heads' outputs joined back per frame; and the
 * reverse for backward. nn/attention.ts and the tensor-parallel heads both run it.
 */
export class AttentionHeads {
  private readonly qkvRows: HeadRows;
  private readonly outRows: HeadRows;

  constructor(
    private readonly pool: BufferPool,
    readonly heads: number,
    readonly headDim: number,
    readonly causal: boolean,
  ) {
    this.qkvRows = new HeadRows(pool, 'qkv', 3, heads, headDim);
    this.outRows = new HeadRows(pool, 'out', 1, heads, headDim);
  }

  /** qkv: [N·T, 3·heads·headDim] per frame (padded frames zeroed). */
  forward(
    b: Backend,
    qkv: Float32Array,
    N: number,
    T: number,
    lengths: Int32Array | undefined,
    drop: WeightDropout,
  ): HeadsSaved {
    const g: AttentionGeometry = { N, heads: this.heads, T, headDim: this.headDim, causal: this.causal };
    const size = N * T * this.heads * this.headDim;
    const heads = this.pool.f32('heads', 3 * size);
    const split = this.qkvRows.starts(N, T);
    b.copyRows(qkv, split.frames, heads, split.heads, split.count, this.headDim, false);
    const [q, k, v] = thirds(heads, size);
    const probs = this.pool.f32('probs', N * this.heads * T * T);
    b.attentionWeights(q, k, lengths ?? null, g, probs);
    const { mixed, mask } = drop(probs, g);
    const out = this.pool.f32('out', size);
    b.attentionApply(mixed, v, g, out);
    const merged = this.pool.f32('merged', size);
    const join = this.outRows.starts(N, T);
    b.copyRows(out, join.heads, merged, join.frames, join.count, this.headDim, false);
    return { g, heads, probs, mixed, mask, merged };
  }

  /** dmerged: dL/d(the output projection's input) per frame. Returns dL/dqkv per frame, in forward's qkv array. */
  backward(b: Backend, s: HeadsSaved, dmerged: Float32Array): Float32Array {
    const { g } = s;
    const size = g.N * g.T * this.heads * this.headDim;
    const dout = this.pool.f32('dout', size);
    const join = this.outRows.starts(g.N, g.T);
    b.copyRows(dmerged, join.frames, dout, join.heads, join.count, this.headDim, false);
    const dheads = this.pool.f32('dheads', 3 * size);
    const [dq, dk, dv] = thirds(dheads, size),
      [q, k, v] = thirds(s.heads, size);
    const dprobs = this.pool.f32('dprobs', s.probs.length);
    b.attentionApplyBackward(s.mixed, v, dout, g, dprobs, dv);
    if (s.mask) b.dropoutBackward(dprobs, s.mask, dprobs, dprobs.length);
    b.attentionWeightsBackward(q, k, s.probs, dprobs, g, dq, dk);
    // back to frames: the qkv array of forward is free again
    const dqkv = this.pool.f32('qkv', 3 * size);
    const split = this.qkvRows.starts(g.N, g.T);
    b.copyRows(dheads, split.heads, dqkv, split.frames, split.count, this.headDim, false);
    return dqkv;
  }
}

/** q, k and v of a head-major array of three parts of `size`. */
function thirds(a: Float32Array, size: number): [Float32Array, Float32Array, Float32Array] {
  return [a.subarray(0, size), a.subarray(size, 2 * size), a.subarray(2 * size, 3 * size)];
}
