import type { Tensor } from '../tensor/tensor.ts';
import { backwardReadsInput, type ActivationKind } from '../kernels/activation.ts';

/**
 * Max pooling straight after an element-wise activation f (a conv2d's own, or an activation layer)
 * takes over f's backward, on its own output, which is 1/(KH·KW) the size.
 *
 * Why it is exact: with windows that do not overlap, each input cell gets the gradient of at most
 * one output, and only at the window's maximum; there f'(y) is f' of the pool's output, because the
 * pool's output IS that y. So f'(y) ⊙ scatter(dy) = scatter(f'(y_pool) ⊙ dy), value for value
 * (zeros stay zeros, as every f' here is finite). The producer then skips its activation backward,
 * two memory-bound passes over the largest activation of a CNN (the first convolution's output).
 *
 * The hand-over is keyed by the Tensor objects of one pass (fresh each forward and backward), so a
 * layer only skips its activation backward for a gradient that provably came through the pool that
 * read its own output; any other wiring (tiles, split models, a layer in between) computes as before.
 */

/** The activation whose output a tensor is. */
export interface ActivationOutput {
  kind: ActivationKind;
  cap?: number;
}

const outputs = new WeakMap<Tensor, ActivationOutput>();
const through = new WeakMap<Tensor, Tensor>();

/** Marks `y` as the output of activation `kind` (when its backward reads the output, so a pool may take it over). */
export function markActivationOutput(y: Tensor, kind: ActivationKind, cap?: number): void {
  if (kind !== 'linear' && !backwardReadsInput(kind)) outputs.set(y, { kind, cap });
}

/** The activation whose output `x` is, if its producer marked it. */
export function activationOf(x: Tensor): ActivationOutput | undefined {
  return outputs.get(x);
}

/** Marks `dx` as the gradient of `y` already through y's activation backward. */
export function markGradThroughActivation(dx: Tensor, y: Tensor): void {
  through.set(dx, y);
}

/** True when `dy`, the gradient of `y`, is already through y's activation backward (skip it). */
export function gradThroughActivation(dy: Tensor, y: Tensor | null): boolean {
  return y !== null && through.get(dy) === y;
}
