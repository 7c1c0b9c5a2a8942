/**
 * The Backend's scaled dot-product attention, per (sample, head), on head-major arrays: Q, K, V and
 * the output are [N, heads, T, headDim], the attention weights [N, heads, T, T] (queries × keys).
 * Four passes instead of one forward and one backward so that a layer can drop out attention
 * weights between them with the backend's dropout kernels (src/nn/attention.ts).
 * src/kernels/js/attention.ts is the definition: gemms per (sample, head), softmax rows in float64.
 */

/** One attention call's shape. */
export interface AttentionGeometry {
  /** samples */
  readonly N: number;
  readonly heads: number;
  /** frames: queries and keys alike */
  readonly T: number;
  /** features per head */
  readonly headDim: number;
  /** query i sees keys 0…i only */
  readonly causal: boolean;
}

export interface AttentionKernels {
  /**
   * P = softmax(Q·Kᵀ/√headDim) per (sample n, head), each query row's maximum subtracted. Key j of
   * query i is masked (P = 0) when j > i (causal) or j ≥ lengths[n]; query rows i ≥ lengths[n] are
   * all 0. `lengths` null: every frame valid. probs overwritten.
   */
  attentionWeights(
    q: Float32Array,
    k: Float32Array,
    lengths: Int32Array | null,
    g: AttentionGeometry,
    probs: Float32Array,
  ): void;
  /** out = P·V per (sample, head) (out overwritten). */
  attentionApply(probs: Float32Array, v: Float32Array, g: AttentionGeometry, out: Float32Array): void;
  /** attentionApply's backward: dV = Pᵀ·dO and dP = dO·Vᵀ per (sample, head) (dprobs, dv overwritten). */
  attentionApplyBackward(
    probs: Float32Array,
    v: Float32Array,
    dout: Float32Array,
    g: AttentionGeometry,
    dprobs: Float32Array,
    dv: Float32Array,
  ): void;
  /**
   * attentionWeights' backward from its P: dS = P ⊙ (dP − rowsum(dP ⊙ P)), written over dprobs,
   * then dQ = dS·K/√headDim and dK = dSᵀ·Q/√headDim (dq, dk overwritten).
   */
  attentionWeightsBackward(
    q: Float32Array,
    k: Float32Array,
    probs: Float32Array,
    dprobs: Float32Array,
    g: AttentionGeometry,
    dq: Float32Array,
    dk: Float32Array,
  ): void;
}
