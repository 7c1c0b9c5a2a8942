/** The activation kinds every backend computes, their parameters' defaults, and which backward reads the input. */

export type ActivationKind = 'relu' | 'clippedRelu' | 'tanh' | 'sigmoid' | 'linear' | 'gelu' | 'leakyRelu';

/** clippedRelu's ceiling and leakyRelu's negative slope when the caller gives none. */
export const DEFAULT_RELU_CAP = 20;
export const DEFAULT_LEAKY_SLOPE = 0.01;

/** The activation's parameter (`cap` of the kernels): the given one, else the kind's default. */
export function activationParam(kind: ActivationKind, param?: number): number {
  return param ?? (kind === 'leakyRelu' ? DEFAULT_LEAKY_SLOPE : DEFAULT_RELU_CAP);
}

/**
 * gelu's derivative is not a function of its output (it is not monotonic), so its backward reads
 * the forward INPUT; every other kind's backward reads the forward output.
 */
export function backwardReadsInput(kind: ActivationKind): boolean {
  return kind === 'gelu';
}
