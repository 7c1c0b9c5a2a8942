/**
 * Batch normalisation's passes (src/kernels/batchNormKernels.ts) on the GPU, over x [rows, C]
 * (channels last). The per-channel sums over the rows run on the device (columnSums.ts:
 * compensated sums per lane, a tree over lanes, slices added in order), in float32: WGSL has no
 * float64, so the results are close to, not the bits of, the js definition's (float64, rounded
 * once), and identical from run to run. Outputs are overwritten.
 */
import { bindArrays, cachedShader, linearGroups, linearMain } from './arrayBindings.ts';
import type { ArrayUse } from './arrayBindings.ts';
import { columnSums } from './columnSums.ts';
import { checkLengths, type GpuArray } from './gpuArray.ts';
import type { GpuContext } from './gpuContext.ts';

function checkSizes(what: string, rows: number, C: number, arrays: [string, GpuArray, number][]): void {
  checkLengths(what, `${rows} rows × ${C} channels`, arrays);
}

/** Records out[c] = Σ_r (x[r, c] − mean[c])². */
export function channelCentredSquares(
  ctx: GpuContext,
  x: GpuArray,
  mean: GpuArray,
  out: GpuArray,
  rows: number,
  C: number,
): void {
  checkSizes('channelCentredSquares', rows, C, [
    ['x', x, rows * C],
    ['mean', mean, C],
    ['out', out, C],
  ]);
  const inputs: ArrayUse[] = [
    { name: 'x', array: x },
    { name: 'mean', array: mean },
  ];
  const term = '  let d = ld_x(i) - ld_mean(c);\n  return vec2f(d * d, 0.0);';
  columnSums(ctx, { name: 'centredSquares', inputs, term, terms: 1, out, accumulate: false }, rows, C);
}

/** Records out[c] = Σ_r dy[r, c] and out[C + c] = Σ_r dy[r, c]·x̂[r, c] (out: 2C floats). */
export function batchNormGradSums(
  ctx: GpuContext,
  dy: GpuArray,
  xhat: GpuArray,
  out: GpuArray,
  rows: number,
  C: number,
): void {
  checkSizes('batchNormGradSums', rows, C, [
    ['dy', dy, rows * C],
    ['xhat', xhat, rows * C],
    ['out', out, 2 * C],
  ]);
  const inputs: ArrayUse[] = [
    { name: 'dy', array: dy },
    { name: 'xhat', array: xhat },
  ];
  const term = '  let g = ld_dy(i);\n  return vec2f(g, g * ld_xhat(i));';
  columnSums(ctx, { name: 'gradSums', inputs, term, terms: 2, out, accumulate: false }, rows, C);
}

const NORMALISE = linearMain(
  'p.count',
  /* wgsl */ `
  let c = i % p.C;
  let h = (ld_x(i) - ld_mean(c)) * ld_invStd(c);
  st_xhat(i, h);
  st_y(i, h * ld_gamma(c) + ld_beta(c));`,
);

/** Records x̂ = (x − mean)·invStd and y = x̂·γ + β. */
export function batchNormNormalise(
  ctx: GpuContext,
  x: GpuArray,
  mean: GpuArray,
  invStd: GpuArray,
  gamma: GpuArray,
  beta: GpuArray,
  xhat: GpuArray,
  y: GpuArray,
  rows: number,
  C: number,
): void {
  const n = rows * C;
  checkSizes('batchNormNormalise', rows, C, [
    ['x', x, n],
    ['mean', mean, C],
    ['invStd', invStd, C],
    ['gamma', gamma, C],
    ['beta', beta, C],
    ['xhat', xhat, n],
    ['y', y, n],
  ]);
  if (n === 0) return;
  const bound = bindArrays(
    [
      { name: 'x', array: x },
      { name: 'mean', array: mean },
      { name: 'invStd', array: invStd },
      { name: 'gamma', array: gamma },
      { name: 'beta', array: beta },
      { name: 'xhat', array: xhat, write: true },
      { name: 'y', array: y, write: true },
    ],
    'count: u32, C: u32',
  );
  const shader = cachedShader('batchNormNormalise', bound, () => NORMALISE);
  bound.params.u32(n).u32(C);
  ctx.dispatch({ shader, arrays: bound.arrays, params: bound.params, groups: linearGroups(n) });
}

const INPUT_GRAD = linearMain(
  'p.count',
  /* wgsl */ `
  let c = i % p.C;
  let k = ld_gamma(c) * ld_invStd(c) / p.M;
  st_dx(i, k * (p.M * ld_dy(i) - ld_sums(c) - ld_xhat(i) * ld_sums(p.C + c)));`,
);

/** Records dx = k·(M·dy − Σdy − x̂·Σdy·x̂), k = γ·invStd/M per channel; `sums` as batchNormGradSums wrote them. */
export function batchNormInputGrad(
  ctx: GpuContext,
  dy: GpuArray,
  xhat: GpuArray,
  gamma: GpuArray,
  invStd: GpuArray,
  sums: GpuArray,
  M: number,
  dx: GpuArray,
  rows: number,
  C: number,
): void {
  const n = rows * C;
  checkSizes('batchNormInputGrad', rows, C, [
    ['dy', dy, n],
    ['xhat', xhat, n],
    ['gamma', gamma, C],
    ['invStd', invStd, C],
    ['sums', sums, 2 * C],
    ['dx', dx, n],
  ]);
  if (n === 0) return;
  const bound = bindArrays(
    [
      { name: 'dy', array: dy },
      { name: 'xhat', array: xhat },
      { name: 'gamma', array: gamma },
      { name: 'invStd', array: invStd },
      { name: 'sums', array: sums },
      { name: 'dx', array: dx, write: true },
    ],
    'count: u32, C: u32, M: f32',
  );
  const shader = cachedShader('batchNormInputGrad', bound, () => INPUT_GRAD);
  bound.params.u32(n).u32(C).f32(M);
  ctx.dispatch({ shader, arrays: bound.arrays, params: bound.params, groups: linearGroups(n) });
}
