/** The Backend's optimizer updates (Adam/AdamW and SGD with momentum), in place, and their parameters. */

export interface AdamParams {
  lr: number;
  beta1: number;
  beta2: number;
  eps: number;
  /** L2 added to the gradient (Adam) or decoupled decay (AdamW), see `decoupled` */
  weightDecay: number;
  decoupled: boolean;
  /** 1-based step count, for bias correction */
  step: number;
  /**
   * 1-bit Adam's frozen variance: when set, v is not updated from the gradient and is bias-corrected
   * by this step, the one after which it was frozen; m keeps its usual update. v only rises, to
   * m̂²·(1 − β2^t₀), where the momentum outgrows it: v̂ ≥ m̂², so no element steps more than lr.
   */
  varianceFrozenAt?: number;
}

/** AdamParams.varianceFrozenAt checked (null: v is updated), after checking the 1-based step. */
export function frozenVarianceStep(p: AdamParams): number | null {
  const { step, varianceFrozenAt: at } = p;
  if (!(step >= 1)) throw new Error(`adamStep: step must be 1-based, got ${step}`);
  if (at === undefined) return null;
  if (!(Number.isInteger(at) && at >= 1 && at <= step))
    throw new Error(`adamStep: varianceFrozenAt must be a step from 1 to the step (${step}), got ${at}`);
  return at;
}

export interface SgdParams {
  lr: number;
  /** 0 disables momentum (then `velocity` may be null) */
  momentum: number;
  nesterov: boolean;
  weightDecay: number;
}

export interface OptimizerKernels {
  /** One Adam/AdamW update of `params` in place; m and v are its moment buffers. */
  adamStep(params: Float32Array, grads: Float32Array, m: Float32Array, v: Float32Array, p: AdamParams): void;
  /** One SGD update (with optional (Nesterov) momentum) of `params` in place. */
  sgdStep(params: Float32Array, grads: Float32Array, velocity: Float32Array | null, p: SgdParams): void;
}
