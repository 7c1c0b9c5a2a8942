/** The Backend's layer normalisation passes (normalisation over the last axis, per row). */

export interface LayerNormKernels {
  /**
   * LayerNorm's forward over `rows` rows of D features: x̂ = (x − mean)·invStd with invStd =
   * 1/√(biased variance + epsilon), y = x̂·γ + β. Row sums in float64 (src/kernels/js/layerNorm.ts is
   * the definition). `valid` (null: every row) marks the rows to normalise; the others (a sequence's
   * padding frames) get x̂ = y = 0 and invStd = 0. xhat, invStd ([rows]) and y are overwritten.
   */
  layerNormForward(
    x: Float32Array,
    gamma: Float32Array,
    beta: Float32Array,
    valid: Int32Array | null,
    rows: number,
    D: number,
    epsilon: number,
    xhat: Float32Array,
    invStd: Float32Array,
    y: Float32Array,
  ): void;
  /**
   * LayerNorm's backward from the forward's x̂ and invStd: dx = invStd·(dy·γ − mean(dy·γ) −
   * x̂·mean(dy·γ·x̂)) on valid rows, 0 on the others (dx overwritten); dγ += Σ dy·x̂ and dβ += Σ dy
   * over the valid rows (ACCUMULATED).
   */
  layerNormBackward(
    dy: Float32Array,
    xhat: Float32Array,
    invStd: Float32Array,
    gamma: Float32Array,
    valid: Int32Array | null,
    rows: number,
    D: number,
    dx: Float32Array,
    dgamma: Float32Array,
    dbeta: Float32Array,
  ): void;
}
