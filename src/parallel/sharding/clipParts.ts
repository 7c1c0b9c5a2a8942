/**
 * train.clipGradNorm when each device holds only its parts of the reduced gradient (ZeRO stages 2 and 3):
 * the global norm is √(Σ over devices of Σ g² over each one's parts), and every part is scaled as a
 * whole gradient would be (optim/clipGradNorm.ts, PyTorch's clip_grad_norm_).
 */
import { clipToNorm, sumOfSquares } from '../../optim/clipGradNorm.ts';
import type { FlatRange } from '../../optim/optimizer.ts';

/**
 * Clips `parts` (views of `grads`) by the norm over every device's parts, which `sum` adds up
 * (collective); frozen ranges of `grads` are zeroed first, as they have no gradient to speak of.
 * Returns the norm before clipping.
 */
export async function clipGradientParts(
  grads: Float32Array,
  frozen: readonly FlatRange[],
  parts: readonly Float32Array[],
  sum: (squares: number) => Promise<number>,
  maxNorm: number,
): Promise<number> {
  for (const f of frozen) grads.fill(0, f.start, Math.min(f.end, grads.length));
  let squares = 0;
  for (const p of parts) squares += sumOfSquares(p);
  const norm = Math.sqrt(await sum(squares));
  clipToNorm(parts, norm, maxNorm);
  return norm;
}
