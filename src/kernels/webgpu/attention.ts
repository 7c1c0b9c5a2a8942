/**
 * The attention kernels on the GPU (src/kernels/attentionKernels.ts is the contract, the js backend's
 * src/kernels/js/attention.ts the definition): every product is one batched gemm (gemm.ts) over the
 * N·heads (sample, head) blocks of the head-major arrays, and the row work — the masked softmax and
 * its backward — is attentionRows.ts. Outputs are overwritten, as on the CPU.
 */
import type { AttentionGeometry } from '../attentionKernels.ts';
import { maskedSoftmaxRows, scoreGradRows } from './attentionRows.ts';
import { gemm } from './gemm.ts';
import type { GpuArray } from './gpuArray.ts';
import type { GpuContext } from './gpuContext.ts';

/**
 * Refuses a geometry that is not whole numbers, arrays too short for it, and a gemm's output sharing
 * a GPU buffer with its inputs (WebGPU cannot bind a buffer twice when one binding is written);
 * `others` are only measured.
 */
function check(
  fn: string,
  g: AttentionGeometry,
  inputs: Record<string, GpuArray>,
  outputs: Record<string, GpuArray>,
  others: Record<string, GpuArray> = {},
) {
  const { N, heads, T, headDim } = g;
  if (![N, heads, T, headDim].every((d) => Number.isInteger(d) && d >= 0))
    throw new RangeError(`${fn}: N, heads, T and headDim must be integers ≥ 0, got ${N}, ${heads}, ${T}, ${headDim}`);
  for (const [name, a] of Object.entries({ ...inputs, ...outputs, ...others })) {
    const need = N * heads * T * (name.includes('probs') ? T : headDim);
    if (a.length < need)
      throw new RangeError(
        `${fn}: ${name} holds ${a.length} values; N=${N}, heads=${heads}, T=${T}, headDim=${headDim} need ${need}`,
      );
  }
  for (const [out, o] of Object.entries(outputs))
    for (const [name, a] of Object.entries(inputs))
      if (a.buffer === o.buffer)
        throw new RangeError(
          `${fn}: ${out} shares a GPU buffer with ${name}; give each output an allocation of its own`,
        );
}

/** The batch of one gemm per (sample, head): blocks of `a`, `b` and `c` values. */
const perHead = (g: AttentionGeometry, a: number, b: number, c: number) => ({ count: g.N * g.heads, a, b, c });

/**
 * Records P = softmax(Q·Kᵀ/√headDim) per (sample, head) with the causal and length masks
 * (AttentionKernels.attentionWeights); `lengths` comes from the host. probs overwritten.
 */
export function attentionWeights(
  ctx: GpuContext,
  q: GpuArray,
  k: GpuArray,
  lengths: Int32Array | null,
  g: AttentionGeometry,
  probs: GpuArray,
): void {
  check('attentionWeights', g, { q, k }, { probs });
  const { N, heads, T, headDim: dh, causal } = g;
  if (lengths && lengths.length < N)
    throw new RangeError(`attentionWeights: lengths holds ${lengths.length} values for N=${N} samples`);
  // scores only for the query rows some sample keeps; the softmax zeroes the rest of every block
  let rows = T;
  if (lengths) {
    rows = 0;
    for (let n = 0; n < N; n++) rows = Math.max(rows, Math.min(lengths[n]!, T));
  }
  gemm(ctx, false, true, rows, T, dh, 1 / Math.sqrt(dh), q, k, 0, probs, perHead(g, T * dh, T * dh, T * T));
  maskedSoftmaxRows(ctx, probs, lengths, N, heads, T, causal);
}

/** Records out = P·V per (sample, head) (AttentionKernels.attentionApply; out overwritten). */
export function attentionApply(ctx: GpuContext, probs: GpuArray, v: GpuArray, g: AttentionGeometry, out: GpuArray) {
  check('attentionApply', g, { probs, v }, { out });
  const { T, headDim: dh } = g;
  gemm(ctx, false, false, T, dh, T, 1, probs, v, 0, out, perHead(g, T * T, T * dh, T * dh));
}

/** Records dV = Pᵀ·dO and dP = dO·Vᵀ per (sample, head) (AttentionKernels.attentionApplyBackward; both overwritten). */
export function attentionApplyBackward(
  ctx: GpuContext,
  probs: GpuArray,
  v: GpuArray,
  dout: GpuArray,
  g: AttentionGeometry,
  dprobs: GpuArray,
  dv: GpuArray,
): void {
  check('attentionApplyBackward', g, { probs, v, dout }, { dprobs, dv });
  const { T, headDim: dh } = g;
  gemm(ctx, true, false, T, dh, T, 1, probs, dout, 0, dv, perHead(g, T * T, T * dh, T * dh));
  gemm(ctx, false, true, T, T, dh, 1, dout, v, 0, dprobs, perHead(g, T * dh, T * dh, T * T));
}

/**
 * Records attentionWeights' backward from its P (AttentionKernels.attentionWeightsBackward):
 * dS = P ⊙ (dP − rowsum(dP ⊙ P)) over dprobs, then dQ = dS·K/√headDim and dK = dSᵀ·Q/√headDim
 * (dq, dk overwritten).
 */
export function attentionWeightsBackward(
  ctx: GpuContext,
  q: GpuArray,
  k: GpuArray,
  probs: GpuArray,
  dprobs: GpuArray,
  g: AttentionGeometry,
  dq: GpuArray,
  dk: GpuArray,
): void {
  // dprobs is written in place by the row kernel, which binds a buffer once: it may share one with probs
  check('attentionWeightsBackward', g, { q, k, dprobs }, { dq, dk }, { probs });
  const { T, headDim: dh } = g;
  scoreGradRows(ctx, probs, dprobs, g.N * g.heads * T, T);
  const scale = 1 / Math.sqrt(dh);
  gemm(ctx, false, false, T, dh, T, scale, dprobs, k, 0, dq, perHead(g, T * T, T * dh, T * dh));
  gemm(ctx, true, false, T, dh, T, scale, dprobs, q, 0, dk, perHead(g, T * T, T * dh, T * dh));
}
