/**
 * Layer normalisation over the last axis on the GPU, the math of src/nn/layerNorm.ts in float32:
 * one workgroup per row reduces its mean, then its biased variance (two passes, no cancellation),
 * and normalises; the backward's input gradient reduces Σdy·γ and Σdy·γ·x̂ per row the same way,
 * and γ's and β's gradients are column sums over the rows. Rows marked invalid (a sequence's
 * padding frames) give zeros and take no part in the gradients.
 */
import type { ArrayUse } from './arrayBindings.ts';
import { bindArrays, cachedShader } from './arrayBindings.ts';
import { columnSums } from './columnSums.ts';
import type { GpuArray } from './gpuArray.ts';
import type { GpuContext } from './gpuContext.ts';
import { uploadInts } from './hostInts.ts';

const WORKGROUP = 64;

/** WGSL: the row loop of one workgroup; `body` sees row r at element `at`, `reduce(s)` sums over the workgroup. */
function rowKernel(body: string, withValid: boolean): string {
  return /* wgsl */ `
var<workgroup> red: array<f32, ${WORKGROUP}>;

fn reduce(s: f32, l: u32) -> f32 {
  red[l] = s;
  workgroupBarrier();
  for (var half = ${WORKGROUP / 2}u; half > 0u; half >>= 1u) {
    if (l < half) { red[l] += red[l + half]; }
    workgroupBarrier();
  }
  let total = red[0];
  workgroupBarrier();
  return total;
}

@compute @workgroup_size(${WORKGROUP})
fn main(@builtin(local_invocation_index) l: u32, @builtin(workgroup_id) wg: vec3u,
        @builtin(num_workgroups) groups: vec3u) {
  for (var r = wg.x; r < p.rows; r += groups.x) {
    let at = r * p.D;
    let valid = ${withValid ? 'ld_valid(r) != 0' : 'true'};
${body}
  }
}`;
}

const FORWARD = /* wgsl */ `
    var s = 0.0;
    for (var j = l; j < p.D; j += ${WORKGROUP}u) { s += ld_x(at + j); }
    let mean = reduce(s, l) / f32(p.D);
    var q = 0.0;
    for (var j = l; j < p.D; j += ${WORKGROUP}u) {
      let d = ld_x(at + j) - mean;
      q += d * d;
    }
    let inv = select(0.0, 1.0 / sqrt(reduce(q, l) / f32(p.D) + p.eps), valid);
    if (l == 0u) { st_invStd(r, inv); }
    for (var j = l; j < p.D; j += ${WORKGROUP}u) {
      let h = select(0.0, (ld_x(at + j) - mean) * inv, valid);
      st_xhat(at + j, h);
      st_y(at + j, select(0.0, h * ld_gamma(j) + ld_beta(j), valid));
    }`;

const BACKWARD = /* wgsl */ `
    var s = 0.0;
    var sx = 0.0;
    for (var j = l; j < p.D; j += ${WORKGROUP}u) {
      let dh = ld_dy(at + j) * ld_gamma(j);
      s += dh;
      sx += dh * ld_xhat(at + j);
    }
    let mean = reduce(s, l) / f32(p.D);
    let meanXhat = reduce(sx, l) / f32(p.D);
    let inv = ld_invStd(r);
    for (var j = l; j < p.D; j += ${WORKGROUP}u) {
      let g = inv * (ld_dy(at + j) * ld_gamma(j) - mean - ld_xhat(at + j) * meanXhat);
      st_dx(at + j, select(0.0, g, valid));
    }`;

function checkShape(fn: string, rows: number, D: number, arrays: Record<string, GpuArray>, valid: Int32Array | null) {
  for (const [name, a] of Object.entries(arrays)) {
    const need = ['gamma', 'beta', 'dgamma', 'dbeta'].includes(name) ? D : name === 'invStd' ? rows : rows * D;
    if (a.length < need)
      throw new RangeError(`${fn}: ${rows} rows of ${D} features need ${name} of ${need}, got ${a.length}`);
  }
  if (valid && valid.length < rows) throw new RangeError(`${fn}: valid has ${valid.length} flags for ${rows} rows`);
}

/** Records a row kernel; `flags` (uploaded valid flags, or null: every row valid) is bound as `valid`. */
function dispatchRows(
  ctx: GpuContext,
  name: string,
  body: string,
  uses: ArrayUse[],
  flags: GpuArray | null,
  rows: number,
  D: number,
  eps: number,
) {
  if (flags) uses.push({ name: 'valid', array: flags, int: true });
  const bound = bindArrays(uses, 'rows: u32, D: u32, eps: f32');
  bound.params.u32(rows).u32(D).f32(eps);
  const shader = cachedShader(`${name}.${flags ? 'masked' : 'all'}`, bound, () => rowKernel(body, flags !== null));
  ctx.dispatch({ shader, arrays: bound.arrays, params: bound.params, groups: [Math.min(rows, 65535)] });
}

/**
 * Records LayerNorm's forward over `rows` rows of D features: x̂ = (x − mean)·invStd, invStd =
 * 1/√(biased variance + epsilon), y = x̂·γ + β. `valid` (from the host; null: every row) marks the
 * rows to normalise; the others get x̂ = y = 0 and invStd = 0.
 */
export function layerNormForward(
  ctx: GpuContext,
  x: GpuArray,
  gamma: GpuArray,
  beta: GpuArray,
  valid: Int32Array | null,
  rows: number,
  D: number,
  epsilon: number,
  xhat: GpuArray,
  invStd: GpuArray,
  y: GpuArray,
): void {
  checkShape('layerNormForward', rows, D, { x, gamma, beta, xhat, invStd, y }, valid);
  if (rows === 0 || D === 0) return;
  const uses: ArrayUse[] = [
    { name: 'x', array: x },
    { name: 'gamma', array: gamma },
    { name: 'beta', array: beta },
    { name: 'xhat', array: xhat, write: true },
    { name: 'invStd', array: invStd, write: true },
    { name: 'y', array: y, write: true },
  ];
  const flags = valid ? uploadInts(ctx, valid.subarray(0, rows)) : null;
  dispatchRows(ctx, 'layerNormForward', FORWARD, uses, flags, rows, D, epsilon);
}

/**
 * Records LayerNorm's backward from the forward's x̂ and invStd: dx = invStd·(dy·γ − mean(dy·γ) −
 * x̂·mean(dy·γ·x̂)) on valid rows, 0 on the others; dγ += Σ dy·x̂ and dβ += Σ dy over the valid rows.
 */
export function layerNormBackward(
  ctx: GpuContext,
  dy: GpuArray,
  xhat: GpuArray,
  invStd: GpuArray,
  gamma: GpuArray,
  valid: Int32Array | null,
  rows: number,
  D: number,
  dx: GpuArray,
  dgamma: GpuArray,
  dbeta: GpuArray,
): void {
  checkShape('layerNormBackward', rows, D, { dy, xhat, invStd, gamma, dx, dgamma, dbeta }, valid);
  if (rows === 0 || D === 0) return;
  const uses: ArrayUse[] = [
    { name: 'dy', array: dy },
    { name: 'xhat', array: xhat },
    { name: 'invStd', array: invStd },
    { name: 'gamma', array: gamma },
    { name: 'dx', array: dx, write: true },
  ];
  const flags = valid ? uploadInts(ctx, valid.subarray(0, rows)) : null;
  dispatchRows(ctx, 'layerNormBackward', BACKWARD, uses, flags, rows, D, 0);
  // padding rows hold x̂ = 0 but any dy: their flag leaves them out of dβ
  const keep = flags ? 'select(0.0, 1.0, ld_valid(i / p.C) != 0)' : '1.0';
  const sums: [string, GpuArray, string][] = [
    ['Gamma', dgamma, 'ld_dy(i) * ld_xhat(i)'],
    ['Beta', dbeta, 'ld_dy(i)'],
  ];
  for (const [name, out, term] of sums) {
    const inputs: ArrayUse[] = [{ name: 'dy', array: dy }];
    if (name === 'Gamma') inputs.push({ name: 'xhat', array: xhat });
    if (flags) inputs.push({ name: 'valid', array: flags, int: true });
    columnSums(
      ctx,
      {
        name: `layerNorm${name}.${flags ? 'masked' : 'all'}`,
        inputs,
        term: `  return vec2f(${term} * ${keep}, 0.0);`,
        terms: 1,
        out,
        accumulate: true,
      },
      rows,
      D,
    );
  }
}
