import { frozenVarianceStep, type AdamParams, type SgdParams } from '../optimizerKernels.ts';

/**
 * In-place optimizer updates over flat parameter buffers, with the exact semantics of
 * torch.optim.Adam / AdamW / SGD (dampening 0). Arithmetic is float64 per element; the stored
 * parameters and state are float32.
 */

function checkLengths(what: string, n: number, arrays: Record<string, Float32Array | null>): void {
  for (const [name, a] of Object.entries(arrays)) {
    if (a && a.length < n) throw new Error(`${what}: ${name} has ${a.length} values, params ${n}`);
  }
}

/**
 * m = β1·m + (1−β1)·g; v = β2·v + (1−β2)·g²; p −= lr·m̂/(√v̂ + ε) with m̂, v̂ bias-corrected by step t.
 * Adam (decoupled = false) first adds wd·p to g (L2); AdamW (decoupled = true) first does p −= lr·wd·p.
 * With varianceFrozenAt = t₀ (1-bit Adam), v is not updated from g and v̂ = v/(1 − β2^t₀); v only
 * rises to m̂²·(1 − β2^t₀) where the momentum outgrows it, so that v̂ ≥ m̂² and no element steps more
 * than lr: a weight whose gradient was near zero when v froze would otherwise step by m̂/√v̂ ≫ 1.
 */
export function adamStep(
  params: Float32Array,
  grads: Float32Array,
  m: Float32Array,
  v: Float32Array,
  p: AdamParams,
): void {
  const n = params.length;
  checkLengths('adamStep', n, { grads, m, v });
  const { lr, beta1, beta2, eps, weightDecay, decoupled, step } = p;
  const frozen = frozenVarianceStep(p);
  const bc1 = 1 - beta1 ** step;
  const bc2 = 1 - beta2 ** (frozen ?? step);
  const l2 = decoupled ? 0 : weightDecay;
  const shrink = decoupled ? 1 - lr * weightDecay : 1;
  const c1 = 1 - beta1,
    c2 = 1 - beta2;
  const floorScale = bc2 / (bc1 * bc1);
  for (let i = 0; i < n; i++) {
    let w = params[i];
    const g = grads[i] + l2 * w;
    w *= shrink;
    const mi = beta1 * m[i] + c1 * g;
    const vi = frozen === null ? beta2 * v[i] + c2 * g * g : Math.max(v[i], mi * mi * floorScale);
    m[i] = mi;
    v[i] = vi;
    params[i] = w - (lr * (mi / bc1)) / (Math.sqrt(vi / bc2) + eps);
  }
}

/**
 * g' = g + wd·p; with momentum: v = μ·v + g', step = nesterov ? g' + μ·v : v; else step = g';
 * p −= lr·step.
 */
export function sgdStep(params: Float32Array, grads: Float32Array, velocity: Float32Array | null, p: SgdParams): void {
  const n = params.length;
  const { lr, momentum, nesterov, weightDecay } = p;
  checkLengths('sgdStep', n, { grads, velocity });
  if (momentum > 0) {
    if (!velocity) throw new Error('sgdStep: momentum > 0 needs a velocity buffer');
    for (let i = 0; i < n; i++) {
      const w = params[i];
      const g = grads[i] + weightDecay * w;
      const vi = momentum * velocity[i] + g;
      velocity[i] = vi;
      params[i] = w - lr * (nesterov ? g + momentum * vi : vi);
    }
  } else {
    for (let i = 0; i < n; i++) {
      const w = params[i];
      params[i] = w - lr * (grads[i] + weightDecay * w);
    }
  }
}
