// Elementwise kernels: bias add/grad, activations, softmax cross-entropy, axpy/scale, optimizer steps.

import { at, madd, zeroF32 } from './simd';
import { vexp2, vHalfSquareHead, vHalfSquareTail, vnormalCdf } from './vmath';

export function biasAdd(x: usize, bias: usize, y: usize, rows: i32, cols: i32): void {
  for (let r = 0; r < rows; r++) {
    const xr = at(x, r * cols), yr = at(y, r * cols);
    let c = 0;
    for (; c + 4 <= cols; c += 4) v128.store(at(yr, c), f32x4.add(v128.load(at(xr, c)), v128.load(at(bias, c))));
    for (; c < cols; c++) store<f32>(at(yr, c), load<f32>(at(xr, c)) + load<f32>(at(bias, c)));
  }
}

/** db[c] += Σ_r dy[r, c], summed in float64 in `acc` (cols·8 bytes of scratch, 16-byte aligned). */
export function biasGrad(dy: usize, db: usize, rows: i32, cols: i32, acc: usize): void {
  const cols4 = cols & ~3;
  for (let c = 0; c < cols; c++) store<f64>(acc + (<usize>c << 3), 0);
  for (let r = 0; r < rows; r++) {
    const row = at(dy, r * cols);
    let c = 0;
    for (; c < cols4; c += 4) {
      const v = v128.load(at(row, c));
      const p = acc + (<usize>c << 3);
      v128.store(p, f64x2.add(v128.load(p), f64x2.promote_low_f32x4(v)));
      v128.store(p, f64x2.add(v128.load(p, 16), f64x2.promote_low_f32x4(v128.shuffle<f32>(v, v, 2, 3, 2, 3))), 16);
    }
    for (; c < cols; c++) {
      const p = acc + (<usize>c << 3);
      store<f64>(p, load<f64>(p) + <f64>load<f32>(at(row, c)));
    }
  }
  for (let c = 0; c < cols; c++) {
    const p = at(db, c);
    store<f32>(p, <f32>(<f64>load<f32>(p) + load<f64>(acc + (<usize>c << 3))));
  }
}

// Activation kinds (must match the JS side).
export const ACT_RELU: i32 = 0;
export const ACT_CLIPPED_RELU: i32 = 1;
export const ACT_TANH: i32 = 2;
export const ACT_SIGMOID: i32 = 3;
export const ACT_LINEAR: i32 = 4;
export const ACT_GELU: i32 = 5;
export const ACT_LEAKY_RELU: i32 = 6;

const INV_SQRT_2PI: f32 = 0.3989422804014327;

/** x·Φ(x) on four lanes, float32 (vnormalCdf: the js reference's erfc fit). */
// @ts-ignore: decorator
@inline function vgelu(x: v128): v128 {
  const ax = f32x4.abs(x);
  return f32x4.mul(x, vnormalCdf(x, ax, vHalfSquareHead(ax), vHalfSquareTail(ax)));
}

/** dy·(Φ(x) + x·φ(x)) on four lanes, from the forward input x; φ = e^(−x²/2)/√(2π), 0 where Φ is. */
// @ts-ignore: decorator
@inline function vgeluGrad(x: v128, dy: v128): v128 {
  const ax = f32x4.abs(x);
  const hi = vHalfSquareHead(ax), lo = vHalfSquareTail(ax);
  const phi = v128.andnot(f32x4.mul(vexp2(hi, lo), f32x4.splat(INV_SQRT_2PI)), f32x4.lt(hi, f32x4.splat(-87.0)));
  return f32x4.mul(dy, madd(x, phi, vnormalCdf(x, ax, hi, lo)));
}

export function activationForward(kind: i32, x: usize, y: usize, n: i32, cap: f32): void {
  const z = f32x4.splat(0);
  let i = 0;
  if (kind == ACT_RELU) {
    // v < 0 ? 0 : v (NaN passes through)
    for (; i + 4 <= n; i += 4) {
      const v = v128.load(at(x, i));
      v128.store(at(y, i), v128.andnot(v, f32x4.lt(v, z)));
    }
    for (; i < n; i++) { const v = load<f32>(at(x, i)); store<f32>(at(y, i), v < 0 ? 0 : v); }
  } else if (kind == ACT_CLIPPED_RELU) {
    const vc = f32x4.splat(cap);
    for (; i + 4 <= n; i += 4) {
      let v = v128.load(at(x, i));
      v = v128.bitselect(vc, v, f32x4.gt(v, vc));
      v128.store(at(y, i), v128.andnot(v, f32x4.lt(v, z)));
    }
    for (; i < n; i++) { const v = load<f32>(at(x, i)); store<f32>(at(y, i), v < 0 ? 0 : v > cap ? cap : v); }
  } else if (kind == ACT_TANH) {
    for (; i < n; i++) store<f32>(at(y, i), <f32>Math.tanh(<f64>load<f32>(at(x, i))));
  } else if (kind == ACT_SIGMOID) {
    for (; i < n; i++) store<f32>(at(y, i), <f32>(1.0 / (1.0 + Math.exp(-<f64>load<f32>(at(x, i))))));
  } else if (kind == ACT_LEAKY_RELU) {
    // v < 0 ? slope·v : v (NaN passes through)
    const vs = f32x4.splat(cap);
    for (; i + 4 <= n; i += 4) {
      const v = v128.load(at(x, i));
      v128.store(at(y, i), v128.bitselect(f32x4.mul(v, vs), v, f32x4.lt(v, z)));
    }
    for (; i < n; i++) { const v = load<f32>(at(x, i)); store<f32>(at(y, i), v < 0 ? cap * v : v); }
  } else if (kind == ACT_GELU) {
    // the last few through the same lanes, so a value's result never depends on where it sits
    for (; i + 4 <= n; i += 4) v128.store(at(y, i), vgelu(v128.load(at(x, i))));
    for (; i < n; i++) store<f32>(at(y, i), f32x4.extract_lane(vgelu(f32x4.splat(load<f32>(at(x, i)))), 0));
  } else {
    if (x != y) memory.copy(y, x, <usize>n << 2);
  }
}

export function activationBackward(kind: i32, y: usize, dy: usize, dx: usize, n: i32, cap: f32): void {
  const z = f32x4.splat(0);
  const one = f32x4.splat(1);
  let i = 0;
  if (kind == ACT_RELU) {
    for (; i + 4 <= n; i += 4) {
      v128.store(at(dx, i), v128.and(v128.load(at(dy, i)), f32x4.gt(v128.load(at(y, i)), z)));
    }
    for (; i < n; i++) store<f32>(at(dx, i), load<f32>(at(y, i)) > 0 ? load<f32>(at(dy, i)) : 0);
  } else if (kind == ACT_CLIPPED_RELU) {
    const vc = f32x4.splat(cap);
    for (; i + 4 <= n; i += 4) {
      const v = v128.load(at(y, i));
      v128.store(at(dx, i), v128.and(v128.load(at(dy, i)), v128.and(f32x4.gt(v, z), f32x4.lt(v, vc))));
    }
    for (; i < n; i++) { const v = load<f32>(at(y, i)); store<f32>(at(dx, i), v > 0 && v < cap ? load<f32>(at(dy, i)) : 0); }
  } else if (kind == ACT_TANH) {
    for (; i + 4 <= n; i += 4) {
      const v = v128.load(at(y, i));
      v128.store(at(dx, i), f32x4.mul(v128.load(at(dy, i)), f32x4.sub(one, f32x4.mul(v, v))));
    }
    for (; i < n; i++) { const v = load<f32>(at(y, i)); store<f32>(at(dx, i), load<f32>(at(dy, i)) * (1 - v * v)); }
  } else if (kind == ACT_SIGMOID) {
    for (; i + 4 <= n; i += 4) {
      const v = v128.load(at(y, i));
      v128.store(at(dx, i), f32x4.mul(f32x4.mul(v128.load(at(dy, i)), v), f32x4.sub(one, v)));
    }
    for (; i < n; i++) { const v = load<f32>(at(y, i)); store<f32>(at(dx, i), load<f32>(at(dy, i)) * v * (1 - v)); }
  } else if (kind == ACT_LEAKY_RELU) {
    const vs = f32x4.splat(cap);
    for (; i + 4 <= n; i += 4) {
      const g = v128.load(at(dy, i));
      v128.store(at(dx, i), v128.bitselect(g, f32x4.mul(g, vs), f32x4.gt(v128.load(at(y, i)), z)));
    }
    for (; i < n; i++) { const g = load<f32>(at(dy, i)); store<f32>(at(dx, i), load<f32>(at(y, i)) > 0 ? g : cap * g); }
  } else if (kind == ACT_GELU) {
    // from the forward INPUT (passed as y): Φ(x) + x·φ(x)
    for (; i + 4 <= n; i += 4) v128.store(at(dx, i), vgeluGrad(v128.load(at(y, i)), v128.load(at(dy, i))));
    for (; i < n; i++) {
      const g = vgeluGrad(f32x4.splat(load<f32>(at(y, i))), f32x4.splat(load<f32>(at(dy, i))));
      store<f32>(at(dx, i), f32x4.extract_lane(g, 0));
    }
  } else {
    if (dx != dy) memory.copy(dx, dy, <usize>n << 2);
  }
}

/** Returns the sum of row losses; labels must be validated by the caller. dlogits may be logits. */
export function softmaxCrossEntropy(logits: usize, labels: usize, rows: i32, classes: i32, dlogits: usize, gradScale: f64): f64 {
  let total: f64 = 0;
  for (let r = 0; r < rows; r++) {
    const base = r * classes;
    let mx: f64 = -Infinity;
    for (let i = 0; i < classes; i++) { const v = <f64>load<f32>(at(logits, base + i)); if (v > mx) mx = v; }
    let sum: f64 = 0;
    for (let i = 0; i < classes; i++) sum += Math.exp(<f64>load<f32>(at(logits, base + i)) - mx);
    const label = load<i32>(at(labels, r));
    const zLabel = <f64>load<f32>(at(logits, base + label)) - mx;
    total += Math.log(sum) - zLabel;
    const inv = gradScale / sum;
    for (let i = 0; i < classes; i++) {
      store<f32>(at(dlogits, base + i), <f32>(Math.exp(<f64>load<f32>(at(logits, base + i)) - mx) * inv));
    }
    store<f32>(at(dlogits, base + label), <f32>((Math.exp(zLabel) / sum - 1) * gradScale));
  }
  return total;
}

export function axpy(alpha: f32, x: usize, y: usize, n: i32): void {
  const va = f32x4.splat(alpha);
  let i = 0;
  for (; i + 4 <= n; i += 4) v128.store(at(y, i), f32x4.add(v128.load(at(y, i)), f32x4.mul(va, v128.load(at(x, i)))));
  for (; i < n; i++) store<f32>(at(y, i), load<f32>(at(y, i)) + alpha * load<f32>(at(x, i)));
}

export function scale(alpha: f32, x: usize, n: i32): void {
  const va = f32x4.splat(alpha);
  let i = 0;
  for (; i + 4 <= n; i += 4) v128.store(at(x, i), f32x4.mul(v128.load(at(x, i)), va));
  for (; i < n; i++) store<f32>(at(x, i), load<f32>(at(x, i)) * alpha);
}

/**
 * Adam/AdamW (torch semantics), float32 arithmetic; c1 = 1−β1, c2 = 1−β2 come from the caller in
 * float64 (1 − f32(0.999) would lose four digits):
 *   g = grad + l2·w; w *= shrink; m = β1·m + (1−β1)·g; v = β2·v + (1−β2)·g²;
 *   w −= lr·(m/bc1) / (sqrt(v/bc2) + eps)
 * freezeV (1-bit Adam): v is not updated from g; the caller bias-corrects it by the step it froze
 * at; it only rises to m̂²·bc2 where the momentum outgrows it (v̂ ≥ m̂²: no element steps more than lr).
 */
export function adamStep(params: usize, grads: usize, m: usize, v: usize, n: i32,
                         lr: f32, beta1: f32, beta2: f32, c1: f32, c2: f32, eps: f32, l2: f32, shrink: f32, invBc1: f32, invBc2: f32,
                         freezeV: bool): void {
  const vl2 = f32x4.splat(l2), vsh = f32x4.splat(shrink);
  const vb1 = f32x4.splat(beta1), vc1 = f32x4.splat(c1);
  const vb2 = f32x4.splat(beta2), vc2 = f32x4.splat(c2);
  const vstep = f32x4.splat(lr * invBc1), vibc2 = f32x4.splat(invBc2), veps = f32x4.splat(eps);
  const floorScale: f32 = invBc1 * invBc1 / invBc2, vfloor = f32x4.splat(floorScale);
  let i = 0;
  for (; i + 4 <= n; i += 4) {
    let w = v128.load(at(params, i));
    const g = f32x4.add(v128.load(at(grads, i)), f32x4.mul(vl2, w));
    w = f32x4.mul(w, vsh);
    const mi = f32x4.add(f32x4.mul(vb1, v128.load(at(m, i))), f32x4.mul(vc1, g));
    let vi = freezeV ? v128.load(at(v, i)) : f32x4.add(f32x4.mul(vb2, v128.load(at(v, i))), f32x4.mul(vc2, f32x4.mul(g, g)));
    v128.store(at(m, i), mi);
    if (freezeV) vi = f32x4.max(vi, f32x4.mul(f32x4.mul(mi, mi), vfloor));
    v128.store(at(v, i), vi);
    const denom = f32x4.add(f32x4.sqrt(f32x4.mul(vi, vibc2)), veps);
    v128.store(at(params, i), f32x4.sub(w, f32x4.div(f32x4.mul(vstep, mi), denom)));
  }
  for (; i < n; i++) {
    let w = load<f32>(at(params, i));
    const g = load<f32>(at(grads, i)) + l2 * w;
    w *= shrink;
    const mi = beta1 * load<f32>(at(m, i)) + c1 * g;
    let vi = freezeV ? load<f32>(at(v, i)) : beta2 * load<f32>(at(v, i)) + c2 * g * g;
    store<f32>(at(m, i), mi);
    if (freezeV) vi = max(vi, mi * mi * floorScale);
    store<f32>(at(v, i), vi);
    store<f32>(at(params, i), w - (lr * invBc1) * mi / (Mathf.sqrt(vi * invBc2) + eps));
  }
}

/** SGD with optional (Nesterov) momentum, torch semantics with dampening 0. velocity may be 0 when momentum is 0. */
export function sgdStep(params: usize, grads: usize, velocity: usize, n: i32,
                        lr: f32, momentum: f32, nesterov: bool, wd: f32): void {
  const vlr = f32x4.splat(lr), vwd = f32x4.splat(wd), vmu = f32x4.splat(momentum);
  let i = 0;
  if (momentum > 0) {
    for (; i + 4 <= n; i += 4) {
      const w = v128.load(at(params, i));
      const g = f32x4.add(v128.load(at(grads, i)), f32x4.mul(vwd, w));
      const vi = f32x4.add(f32x4.mul(vmu, v128.load(at(velocity, i))), g);
      v128.store(at(velocity, i), vi);
      const s = nesterov ? f32x4.add(g, f32x4.mul(vmu, vi)) : vi;
      v128.store(at(params, i), f32x4.sub(w, f32x4.mul(vlr, s)));
    }
    for (; i < n; i++) {
      const w = load<f32>(at(params, i));
      const g = load<f32>(at(grads, i)) + wd * w;
      const vi = momentum * load<f32>(at(velocity, i)) + g;
      store<f32>(at(velocity, i), vi);
      store<f32>(at(params, i), w - lr * (nesterov ? g + momentum * vi : vi));
    }
  } else {
    for (; i + 4 <= n; i += 4) {
      const w = v128.load(at(params, i));
      v128.store(at(params, i), f32x4.sub(w, f32x4.mul(vlr, f32x4.add(v128.load(at(grads, i)), f32x4.mul(vwd, w)))));
    }
    for (; i < n; i++) {
      const w = load<f32>(at(params, i));
      store<f32>(at(params, i), w - lr * (load<f32>(at(grads, i)) + wd * w));
    }
  }
}

export { zeroF32 };
