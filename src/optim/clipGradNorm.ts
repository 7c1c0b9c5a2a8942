/**
 * Gradient clipping by global norm (train.clipGradNorm), PyTorch's clip_grad_norm_: the L2 norm of
 * every gradient together; when it exceeds `maxNorm` every gradient is scaled by maxNorm/(norm + 1e-6).
 * Which gradient is clipped — the one that is applied — is the strategies' business (ReplicaView.clipGradients).
 */
import { treeSumOfSquares } from './treeSquares.ts';

/**
 * Σ x² over `buf`, in float64 (finite for any finite float32 gradient), summed along the fixed tree
 * of treeSquares.ts: a gradient split over devices gives the same bits from its parts.
 */
export function sumOfSquares(buf: Float32Array): number {
  return treeSumOfSquares(buf);
}

/**
 * Scales `buffers` so that their global norm `norm` is at most `maxNorm`; true when it scaled. A
 * non-finite norm scales nothing: such a step is a bad step, skipped before it is applied
 * (runtime/device/badSteps.ts), never clipped into a finite one.
 */
export function clipToNorm(buffers: readonly Float32Array[], norm: number, maxNorm: number): boolean {
  const coef = clipCoefficient(norm, maxNorm);
  if (coef === null) return false;
  for (const b of buffers) for (let i = 0; i < b.length; i++) b[i] = b[i]! * coef;
  return true;
}

/** The factor clipping scales a gradient of norm `norm` by, or null when it leaves it alone (within the bound, or non-finite). */
export function clipCoefficient(norm: number, maxNorm: number): number | null {
  if (!Number.isFinite(norm)) return null;
  const coef = maxNorm / (norm + 1e-6);
  return coef < 1 ? coef : null;
}
