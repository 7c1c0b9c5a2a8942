/**
 * The attention kernels on the webgpu backend: none in WGSL yet. A model whose top-level layers
 * include attention is refused before training (runtime/device/deviceModelCheck.ts); one nested in
 * a residual block reaches these, which say so instead of computing on stale host copies.
 */
import type { AttentionKernels } from '../attentionKernels.ts';

const refuse = (kernel: string) => (): never => {
  throw new Error(`webgpu: ${kernel} has no WGSL kernel yet; train models with attention with --backend auto`);
};

export const webgpuAttentionKernels: AttentionKernels = {
  attentionWeights: refuse('attentionWeights'),
  attentionApply: refuse('attentionApply'),
  attentionApplyBackward: refuse('attentionApplyBackward'),
  attentionWeightsBackward: refuse('attentionWeightsBackward'),
};
