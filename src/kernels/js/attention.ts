/**
 * Scaled dot-product attention over a backend's gemm (src/kernels/attentionKernels.ts is the
 * contract): every product is one gemm per (sample, head) on views of the head-major arrays; only
 * the softmax rows and their backward are loops, with the row sums in float64. A CPU backend passes
 * its own gemm, so the products run at its speed (OpenBLAS for native) and the rest is shared.
 */
import type { AttentionGeometry, AttentionKernels } from '../attentionKernels.ts';
import type { MatrixKernels } from '../matrixKernels.ts';

/** Refuses a geometry that is not whole numbers, or arrays too short for it, before anything is written. */
export function checkAttention(fn: string, g: AttentionGeometry, arrays: Record<string, Float32Array>): void {
  const { N, heads, T, headDim } = g;
  if (![N, heads, T, headDim].every((d) => Number.isInteger(d) && d >= 0))
    throw new RangeError(`${fn}: N, heads, T and headDim must be integers ≥ 0, got ${N}, ${heads}, ${T}, ${headDim}`);
  for (const [name, a] of Object.entries(arrays)) {
    const need = N * heads * T * (name.includes('probs') ? T : headDim);
    if (a.length < need)
      throw new RangeError(
        `${fn}: ${name} holds ${a.length} values; N=${N}, heads=${heads}, T=${T}, headDim=${headDim} need ${need}`,
      );
  }
}

/** Softmax of query row i of S (T wide) over its first `keys` keys, in place; the masked keys get 0. */
function softmaxRow(s: Float32Array, at: number, keys: number, T: number): void {
  let max = -Infinity;
  for (let j = 0; j < keys; j++) if (s[at + j]! > max) max = s[at + j]!;
  let sum = 0;
  for (let j = 0; j < keys; j++) {
    const e = Math.exp(s[at + j]! - max);
    s[at + j] = e;
    sum += e;
  }
  const inv = 1 / sum;
  for (let j = 0; j < keys; j++) s[at + j] *= inv;
  s.fill(0, at + keys, at + T);
}

/** The four attention passes, their products through `gemm`. */
export function attentionKernels(gemm: MatrixKernels['gemm']): AttentionKernels {
  return {
    attentionWeights(q, k, lengths, g, probs) {
      checkAttention('attentionWeights', g, { q, k, probs });
      const { N, heads, T, headDim: dh, causal } = g;
      const scale = 1 / Math.sqrt(dh);
      for (let n = 0; n < N; n++) {
        const len = lengths ? Math.max(0, Math.min(lengths[n]!, T)) : T;
        for (let h = 0; h < heads; h++) {
          const b = n * heads + h,
            S = probs.subarray(b * T * T, (b + 1) * T * T);
          // only the valid queries' rows: the others are zeros
          if (len > 0) gemm(false, true, len, T, dh, scale, view(q, b, T * dh), view(k, b, T * dh), 0, S);
          for (let i = 0; i < len; i++) softmaxRow(S, i * T, causal ? Math.min(i + 1, len) : len, T);
          S.fill(0, len * T);
        }
      }
    },

    attentionApply(probs, v, g, out) {
      checkAttention('attentionApply', g, { probs, v, out });
      const { T, headDim: dh } = g;
      for (let b = 0; b < g.N * g.heads; b++)
        gemm(false, false, T, dh, T, 1, view(probs, b, T * T), view(v, b, T * dh), 0, view(out, b, T * dh));
    },

    attentionApplyBackward(probs, v, dout, g, dprobs, dv) {
      checkAttention('attentionApplyBackward', g, { probs, v, dout, dprobs, dv });
      const { T, headDim: dh } = g;
      for (let b = 0; b < g.N * g.heads; b++) {
        const P = view(probs, b, T * T),
          dO = view(dout, b, T * dh);
        gemm(true, false, T, dh, T, 1, P, dO, 0, view(dv, b, T * dh));
        gemm(false, true, T, T, dh, 1, dO, view(v, b, T * dh), 0, view(dprobs, b, T * T));
      }
    },

    attentionWeightsBackward(q, k, probs, dprobs, g, dq, dk) {
      checkAttention('attentionWeightsBackward', g, { q, k, probs, dprobs, dq, dk });
      const { T, headDim: dh } = g;
      const scale = 1 / Math.sqrt(dh);
      for (let b = 0; b < g.N * g.heads; b++) {
        const P = view(probs, b, T * T),
          dS = view(dprobs, b, T * T);
        for (let at = 0; at < T * T; at += T) {
          let dot = 0;
          for (let j = 0; j < T; j++) dot += dS[at + j]! * P[at + j]!;
          for (let j = 0; j < T; j++) dS[at + j] = P[at + j]! * (dS[at + j]! - dot);
        }
        gemm(false, false, T, dh, T, scale, dS, view(k, b, T * dh), 0, view(dq, b, T * dh));
        gemm(true, false, T, dh, T, scale, dS, view(q, b, T * dh), 0, view(dk, b, T * dh));
      }
    },
  };
}

/** Block b (a (sample, head) pair) of `size` values. */
const view = (a: Float32Array, b: number, size: number): Float32Array => a.subarray(b * size, (b + 1) * size);
