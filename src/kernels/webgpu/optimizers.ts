/**
 * The optimizer updates on the GPU (OptimizerKernels.adamStep / sgdStep), in place, with the
 * semantics of src/kernels/js/optimizerSteps.ts (torch.optim.Adam / AdamW / SGD, dampening 0) in
 * float32 arithmetic. The parameters and their state may be views of one flat buffer.
 */
import { frozenVarianceStep, type AdamParams, type SgdParams } from '../optimizerKernels.ts';
import type { ArrayUse } from './arrayBindings.ts';
import { bindArrays, cachedShader, linearGroups, linearMain } from './arrayBindings.ts';
import type { GpuArray } from './gpuArray.ts';
import type { GpuContext } from './gpuContext.ts';
import type { Params } from './params.ts';

const ADAM = linearMain(
  'p.n',
  /* wgsl */ `
  var w = ld_params(i);
  let g = ld_grads(i) + p.l2 * w;
  w *= p.shrink;
  let m = p.beta1 * ld_m(i) + p.c1 * g;
  let v = p.beta2 * ld_v(i) + p.c2 * g * g;
  st_m(i, m);
  st_v(i, v);
  st_params(i, w - (p.lr * (m / p.bc1)) / (sqrt(v / p.bc2) + p.eps));`,
);

/**
 * 1-bit Adam's frozen variance: v is not updated from g, bias-corrected by the step it froze at
 * (bc2), and only rises to m̂²·bc2 where the momentum outgrows it (vFloor = bc2/bc1²).
 */
const ADAM_FROZEN_V = linearMain(
  'p.n',
  /* wgsl */ `
  var w = ld_params(i);
  let g = ld_grads(i) + p.l2 * w;
  w *= p.shrink;
  let m = p.beta1 * ld_m(i) + p.c1 * g;
  let v = max(ld_v(i), m * m * p.vFloor);
  st_m(i, m);
  st_v(i, v);
  st_params(i, w - (p.lr * (m / p.bc1)) / (sqrt(v / p.bc2) + p.eps));`,
);

const SGD_MOMENTUM = linearMain(
  'p.n',
  /* wgsl */ `
  let w = ld_params(i);
  let g = ld_grads(i) + p.weightDecay * w;
  let v = p.momentum * ld_velocity(i) + g;
  st_velocity(i, v);
  st_params(i, w - p.lr * select(v, g + p.momentum * v, p.nesterov != 0u));`,
);

const SGD = linearMain(
  'p.n',
  /* wgsl */ `
  let w = ld_params(i);
  st_params(i, w - p.lr * (ld_grads(i) + p.weightDecay * w));`,
);

function checkLengths(fn: string, n: number, arrays: Record<string, GpuArray | null>): void {
  for (const [name, a] of Object.entries(arrays))
    if (a && a.length < n) throw new RangeError(`${fn}: ${name} has ${a.length} values, params ${n}`);
}

/** Records one elementwise update over n; `fill` writes the Params fields after n, in order. */
function run(
  ctx: GpuContext,
  name: string,
  body: string,
  uses: ArrayUse[],
  fields: string,
  n: number,
  fill: (p: Params) => void,
) {
  const bound = bindArrays(uses, fields);
  fill(bound.params.u32(n));
  ctx.dispatch({
    shader: cachedShader(name, bound, () => body),
    arrays: bound.arrays,
    params: bound.params,
    groups: linearGroups(n),
  });
}

/**
 * Records one Adam/AdamW update of `params` in place, m and v its moments: m = β1·m + (1−β1)·g,
 * v = β2·v + (1−β2)·g², p −= lr·m̂/(√v̂ + ε) with bias correction by step; Adam adds wd·p to g,
 * AdamW first shrinks p by lr·wd. The scalars are derived in float64 and rounded to float32.
 * With varianceFrozenAt, v is not updated from g (bias-corrected by that step) and only rises to
 * m̂²·bc2 where the momentum outgrows it, as js does.
 */
export function adamStep(
  ctx: GpuContext,
  params: GpuArray,
  grads: GpuArray,
  m: GpuArray,
  v: GpuArray,
  p: AdamParams,
): void {
  const n = params.length;
  checkLengths('adamStep', n, { grads, m, v });
  const { lr, beta1, beta2, eps, weightDecay, decoupled, step } = p;
  const frozen = frozenVarianceStep(p);
  if (n === 0) return;
  const uses: ArrayUse[] = [
    { name: 'params', array: params, write: true },
    { name: 'grads', array: grads },
    { name: 'm', array: m, write: true },
    { name: 'v', array: v, write: true },
  ];
  const fields =
    'n: u32, lr: f32, beta1: f32, beta2: f32, c1: f32, c2: f32, bc1: f32, bc2: f32, eps: f32, l2: f32, shrink: f32' +
    (frozen === null ? '' : ', vFloor: f32');
  // the scalars in float64, each rounded once to float32
  const bc1 = 1 - beta1 ** step,
    bc2 = 1 - beta2 ** (frozen ?? step);
  const values = [lr, beta1, beta2, 1 - beta1, 1 - beta2, bc1, bc2, eps];
  const l2 = decoupled ? 0 : weightDecay,
    shrink = decoupled ? 1 - lr * weightDecay : 1;
  const [name, body] = frozen === null ? ['adamStep', ADAM] : ['adamStepFrozenV', ADAM_FROZEN_V];
  const vFloor = frozen === null ? [] : [bc2 / bc1 ** 2];
  run(ctx, name, body, uses, fields, n, (params) => {
    for (const value of [...values, l2, shrink, ...vFloor]) params.f32(value);
  });
}

/**
 * Records one SGD update of `params` in place: g' = g + wd·p; with momentum v = μ·v + g' and the step
 * nesterov ? g' + μ·v : v, else the step g'; p −= lr·step. Momentum needs `velocity`.
 */
export function sgdStep(
  ctx: GpuContext,
  params: GpuArray,
  grads: GpuArray,
  velocity: GpuArray | null,
  p: SgdParams,
): void {
  const n = params.length;
  const { lr, momentum, nesterov, weightDecay } = p;
  checkLengths('sgdStep', n, { grads, velocity });
  if (momentum > 0 && !velocity) throw new Error('sgdStep: momentum > 0 needs a velocity buffer');
  if (n === 0) return;
  const uses: ArrayUse[] = [
    { name: 'params', array: params, write: true },
    { name: 'grads', array: grads },
  ];
  if (momentum > 0) {
    uses.push({ name: 'velocity', array: velocity!, write: true });
    const fields = 'n: u32, lr: f32, weightDecay: f32, momentum: f32, nesterov: u32';
    run(ctx, 'sgdMomentum', SGD_MOMENTUM, uses, fields, n, (params) =>
      params.f32(lr).f32(weightDecay).f32(momentum).u32(+nesterov),
    );
  } else {
    run(ctx, 'sgd', SGD, uses, 'n: u32, lr: f32, weightDecay: f32', n, (params) => params.f32(lr).f32(weightDecay));
  }
}
