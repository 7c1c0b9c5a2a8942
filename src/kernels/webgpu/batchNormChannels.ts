/**
 * Batch normalisation's per-channel steps (src/kernels/batchNormKernels.ts: the channel sums, the
 * statistics, the parameter gradients, evaluation mode's input gradient) on the GPU, so that the
 * layer's statistics and parameters never visit the host between its passes. float32 throughout
 * (WGSL has no float64): within a few float32 ulps of the js definition, which rounds once.
 */
import { bindArrays, cachedShader, linearGroups, linearMain } from './arrayBindings.ts';
import { columnSums } from './columnSums.ts';
import { checkLengths, type GpuArray } from './gpuArray.ts';
import type { GpuContext } from './gpuContext.ts';

const need = (kernel: string, arrays: [string, GpuArray, number][]) => checkLengths(kernel, 'the call', arrays);

/** Records out[c] = Σ_r x[r, c] for c < C (out may be longer: the rest is left alone). */
export function channelSums(ctx: GpuContext, x: GpuArray, out: GpuArray, rows: number, C: number): void {
  need('channelSums', [
    ['x', x, rows * C],
    ['out', out, C],
  ]);
  const term = '  return vec2f(ld_x(i), 0.0);';
  columnSums(
    ctx,
    { name: 'channelSums', inputs: [{ name: 'x', array: x }], term, terms: 1, out, accumulate: false },
    rows,
    C,
  );
}

const MEAN = linearMain('p.C', '  st_mean(i, select(0.0, ld_sums(i) / p.rows, p.rows > 0.0));');

/** Records mean[c] = sums[c] / rows (0 when rows is 0). */
export function batchNormMean(ctx: GpuContext, sums: GpuArray, rows: number, mean: GpuArray, C: number): void {
  need('batchNormMean', [
    ['sums', sums, C],
    ['mean', mean, C],
  ]);
  if (C === 0) return;
  const bound = bindArrays(
    [
      { name: 'sums', array: sums },
      { name: 'mean', array: mean, write: true },
    ],
    'C: u32, rows: f32',
  );
  const shader = cachedShader('batchNormMean', bound, () => MEAN);
  bound.params.u32(C).f32(rows);
  ctx.dispatch({ shader, arrays: bound.arrays, params: bound.params, groups: linearGroups(C) });
}

const STATISTICS = linearMain(
  'p.C',
  /* wgsl */ `
  let variance = select(0.0, ld_squares(i) / p.rows, p.rows > 0.0);
  st_invStd(i, 1.0 / sqrt(variance + p.epsilon));
  let unbiased = select(variance, variance * p.rows / (p.rows - 1.0), p.rows > 1.0);
  st_runningMean(i, p.momentum * ld_runningMean(i) + (1.0 - p.momentum) * ld_mean(i));
  st_runningVar(i, p.momentum * ld_runningVar(i) + (1.0 - p.momentum) * unbiased);`,
);

/**
 * Records invStd = 1/√(squares/rows + ε) and running = momentum·running + (1 − momentum)·batch
 * (the variance unbiased). runningMean and runningVar may view one buffer (a model's flat state).
 */
export function batchNormStatistics(
  ctx: GpuContext,
  squares: GpuArray,
  rows: number,
  mean: GpuArray,
  momentum: number,
  epsilon: number,
  invStd: GpuArray,
  runningMean: GpuArray,
  runningVar: GpuArray,
  C: number,
): void {
  need('batchNormStatistics', [
    ['squares', squares, C],
    ['mean', mean, C],
    ['invStd', invStd, C],
    ['runningMean', runningMean, C],
    ['runningVar', runningVar, C],
  ]);
  if (C === 0) return;
  const bound = bindArrays(
    [
      { name: 'squares', array: squares },
      { name: 'mean', array: mean },
      { name: 'invStd', array: invStd, write: true },
      { name: 'runningMean', array: runningMean, write: true },
      { name: 'runningVar', array: runningVar, write: true },
    ],
    'C: u32, rows: f32, momentum: f32, epsilon: f32',
  );
  const shader = cachedShader('batchNormStatistics', bound, () => STATISTICS);
  bound.params.u32(C).f32(rows).f32(momentum).f32(epsilon);
  ctx.dispatch({ shader, arrays: bound.arrays, params: bound.params, groups: linearGroups(C) });
}

const RUNNING = linearMain(
  'p.C',
  /* wgsl */ `
  st_mean(i, ld_runningMean(i));
  st_invStd(i, 1.0 / sqrt(ld_runningVar(i) + p.epsilon));`,
);

/** Records evaluation mode's statistics: mean = runningMean, invStd = 1/√(runningVar + ε). */
export function batchNormRunningStatistics(
  ctx: GpuContext,
  runningMean: GpuArray,
  runningVar: GpuArray,
  epsilon: number,
  mean: GpuArray,
  invStd: GpuArray,
  C: number,
): void {
  need('batchNormRunningStatistics', [
    ['runningMean', runningMean, C],
    ['runningVar', runningVar, C],
    ['mean', mean, C],
    ['invStd', invStd, C],
  ]);
  if (C === 0) return;
  const bound = bindArrays(
    [
      { name: 'runningMean', array: runningMean },
      { name: 'runningVar', array: runningVar },
      { name: 'mean', array: mean, write: true },
      { name: 'invStd', array: invStd, write: true },
    ],
    'C: u32, epsilon: f32',
  );
  const shader = cachedShader('batchNormRunningStatistics', bound, () => RUNNING);
  bound.params.u32(C).f32(epsilon);
  ctx.dispatch({ shader, arrays: bound.arrays, params: bound.params, groups: linearGroups(C) });
}

const PARAM_GRADS = linearMain(
  'p.C',
  /* wgsl */ `
  st_dbeta(i, ld_dbeta(i) + ld_sums(i));
  st_dgamma(i, ld_dgamma(i) + ld_sums(p.C + i));`,
);

/** Records dbeta[c] += sums[c], dgamma[c] += sums[C + c]; dgamma and dbeta may view one buffer (flat gradients). */
export function batchNormParamGrads(
  ctx: GpuContext,
  sums: GpuArray,
  dgamma: GpuArray,
  dbeta: GpuArray,
  C: number,
): void {
  need('batchNormParamGrads', [
    ['sums', sums, 2 * C],
    ['dgamma', dgamma, C],
    ['dbeta', dbeta, C],
  ]);
  if (C === 0) return;
  const bound = bindArrays(
    [
      { name: 'sums', array: sums },
      { name: 'dgamma', array: dgamma, write: true },
      { name: 'dbeta', array: dbeta, write: true },
    ],
    'C: u32',
  );
  const shader = cachedShader('batchNormParamGrads', bound, () => PARAM_GRADS);
  bound.params.u32(C);
  ctx.dispatch({ shader, arrays: bound.arrays, params: bound.params, groups: linearGroups(C) });
}

const AFFINE_INPUT_GRAD = linearMain(
  'p.count',
  /* wgsl */ `
  let c = i % p.C;
  st_dx(i, ld_dy(i) * ld_gamma(c) * ld_invStd(c));`,
);

/** Records evaluation mode's dx = dy·γ·invStd. */
export function batchNormAffineInputGrad(
  ctx: GpuContext,
  dy: GpuArray,
  gamma: GpuArray,
  invStd: GpuArray,
  dx: GpuArray,
  rows: number,
  C: number,
): void {
  const n = rows * C;
  need('batchNormAffineInputGrad', [
    ['dy', dy, n],
    ['gamma', gamma, C],
    ['invStd', invStd, C],
    ['dx', dx, n],
  ]);
  if (n === 0) return;
  const bound = bindArrays(
    [
      { name: 'dy', array: dy },
      { name: 'gamma', array: gamma },
      { name: 'invStd', array: invStd },
      { name: 'dx', array: dx, write: true },
    ],
    'count: u32, C: u32',
  );
  const shader = cachedShader('batchNormAffineInputGrad', bound, () => AFFINE_INPUT_GRAD);
  bound.params.u32(n).u32(C);
  ctx.dispatch({ shader, arrays: bound.arrays, params: bound.params, groups: linearGroups(n) });
}
