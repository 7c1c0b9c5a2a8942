/**
 * The onednn backend's attention kernels (src/kernels/attentionKernels.ts): each call is one addon
 * call (native/onednn/attention.c) that runs the per-(sample, head) products as batched matmul
 * primitives over chunks of heads and the softmax rows and their backward in C between them (AVX-512
 * in float32 where oneDNN dispatches to it, else scalar float64 as the js kernels). Where oneDNN has
 * no matmul for a shape, the addon declines and the js kernels over the backend's gemm run instead
 * (`fallback`), as before this addon path existed.
 */
import type { AttentionKernels } from '../attentionKernels.ts';
import { checkAttention } from '../js/attention.ts';
import type { OneDnnAddon } from './addon.ts';

/** The four kernels through `addon`, each falling back to `fallback`'s when the addon declines the call. */
export function oneDnnAttention(addon: OneDnnAddon, fallback: AttentionKernels): AttentionKernels {
  return {
    attentionWeights(q, k, lengths, g, probs) {
      checkAttention('attentionWeights', g, { q, k, probs });
      if (!addon.attentionWeights(q, k, lengths, probs, g.N, g.heads, g.T, g.headDim, g.causal))
        fallback.attentionWeights(q, k, lengths, g, probs);
    },
    attentionApply(probs, v, g, out) {
      checkAttention('attentionApply', g, { probs, v, out });
      if (!addon.attentionApply(probs, v, out, g.N, g.heads, g.T, g.headDim)) fallback.attentionApply(probs, v, g, out);
    },
    attentionApplyBackward(probs, v, dout, g, dprobs, dv) {
      checkAttention('attentionApplyBackward', g, { probs, v, dout, dprobs, dv });
      if (!addon.attentionApplyBackward(probs, v, dout, dprobs, dv, g.N, g.heads, g.T, g.headDim))
        fallback.attentionApplyBackward(probs, v, dout, g, dprobs, dv);
    },
    attentionWeightsBackward(q, k, probs, dprobs, g, dq, dk) {
      checkAttention('attentionWeightsBackward', g, { q, k, probs, dprobs, dq, dk });
      if (!addon.attentionWeightsBackward(q, k, probs, dprobs, dq, dk, g.N, g.heads, g.T, g.headDim))
        fallback.attentionWeightsBackward(q, k, probs, dprobs, g, dq, dk);
    },
  };
}
