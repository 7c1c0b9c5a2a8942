/**
 * The row work of the webgpu attention kernels (attention.ts has the products): one workgroup per
 * row of the [N, heads, T, T] weights, tree reductions over the row in workgroup memory, in float32
 * (the js backend sums in float64; a row of T values agrees to a few ulps of T).
 *
 * - softmax: each query row of the scores Q·Kᵀ/√headDim becomes softmax over its visible keys (the
 *   row's maximum subtracted), 0 at masked keys; rows of padded queries become all 0.
 * - score gradient: dS = P ⊙ (dP − rowsum(dP ⊙ P)), written over dP.
 */
import type { ArrayUse } from './arrayBindings.ts';
import { bindArrays, cachedShader } from './arrayBindings.ts';
import type { GpuArray } from './gpuArray.ts';
import type { GpuContext } from './gpuContext.ts';
import { uploadInts } from './hostInts.ts';

const WORKGROUP = 64;

/** WGSL: the row loop of one workgroup (row r at element `at`), with max and sum over the workgroup. */
function rowKernel(body: string): string {
  return /* wgsl */ `
var<workgroup> red: array<f32, ${WORKGROUP}>;

fn reduceSum(s: f32, l: u32) -> f32 {
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

// a NaN never wins, as in the CPU backends' \`if (v > max)\`
fn reduceMax(s: f32, l: u32) -> f32 {
  red[l] = s;
  workgroupBarrier();
  for (var half = ${WORKGROUP / 2}u; half > 0u; half >>= 1u) {
    if (l < half) { red[l] = select(red[l], red[l + half], red[l + half] > red[l]); }
    workgroupBarrier();
  }
  let m = red[0];
  workgroupBarrier();
  return m;
}

@compute @workgroup_size(${WORKGROUP})
fn main(@builtin(local_invocation_index) l: u32, @builtin(workgroup_id) wg: vec3u,
        @builtin(num_workgroups) groups: vec3u) {
  for (var r = wg.x; r < p.rows; r += groups.x) {
    let at = r * p.T;
${body}
  }
}`;
}

/** Query i's visible keys: 0…min(i, len − 1) causal, 0…len − 1 otherwise, none past the sample's length. */
const SOFTMAX = (withLengths: boolean) => /* wgsl */ `
    let i = r % p.T;
    var len = p.T;
    ${withLengths ? 'len = u32(clamp(ld_lengths(r / (p.T * p.heads)), 0, i32(p.T)));' : ''}
    var keys = 0u;
    if (i < len) { keys = select(len, min(i + 1u, len), p.causal != 0u); }
    // the reductions run on every row (barriers need the whole workgroup); a padded row has no keys
    var m = p.negInf;
    for (var j = l; j < keys; j += ${WORKGROUP}u) {
      let v = ld_s(at + j);
      m = select(m, v, v > m);
    }
    m = reduceMax(m, l);
    var sum = 0.0;
    for (var j = l; j < keys; j += ${WORKGROUP}u) {
      let e = exp(ld_s(at + j) - m);
      st_s(at + j, e);
      sum += e;
    }
    let inv = 1.0 / reduceSum(sum, l);
    for (var j = l; j < p.T; j += ${WORKGROUP}u) { st_s(at + j, select(0.0, ld_s(at + j) * inv, j < keys)); }`;

const SCORE_GRAD = /* wgsl */ `
    var s = 0.0;
    for (var j = l; j < p.T; j += ${WORKGROUP}u) { s += ld_dp(at + j) * ld_probs(at + j); }
    let dot = reduceSum(s, l);
    for (var j = l; j < p.T; j += ${WORKGROUP}u) { st_dp(at + j, ld_probs(at + j) * (ld_dp(at + j) - dot)); }`;

/** Records a row kernel over `rows` rows of T values (grid-stride past 65535 workgroups). */
function dispatchRows(ctx: GpuContext, name: string, body: string, uses: ArrayUse[], rows: number, fill: Fields) {
  const bound = bindArrays(uses, 'rows: u32, T: u32, heads: u32, causal: u32, negInf: f32');
  bound.params.u32(rows).u32(fill.T).u32(fill.heads).u32(+fill.causal).f32(-Infinity);
  ctx.dispatch({
    shader: cachedShader(name, bound, () => rowKernel(body)),
    arrays: bound.arrays,
    params: bound.params,
    groups: [Math.min(rows, 65535)],
  });
}

interface Fields {
  T: number;
  heads: number;
  causal: boolean;
}

/**
 * Records the masked softmax of every row of `scores` [N, heads, T, T] in place: query i of sample
 * n sees keys j < lengths[n] (clamped to [0, T]; null: all T), and j ≤ i when causal; its masked
 * keys get 0, and every row i ≥ lengths[n] all 0 (whatever it held).
 */
export function maskedSoftmaxRows(
  ctx: GpuContext,
  scores: GpuArray,
  lengths: Int32Array | null,
  N: number,
  heads: number,
  T: number,
  causal: boolean,
): void {
  const rows = N * heads * T;
  if (rows === 0) return;
  const uses: ArrayUse[] = [{ name: 's', array: scores, write: true }];
  if (lengths) uses.push({ name: 'lengths', array: uploadInts(ctx, lengths.subarray(0, N)), int: true });
  const name = `attentionSoftmax.${lengths ? 'lengths' : 'all'}`;
  dispatchRows(ctx, name, SOFTMAX(lengths !== null), uses, rows, { T, heads, causal });
}

/** Records dS = P ⊙ (dP − Σ_j dP_j·P_j) over each of `rows` rows of T values, written over dP. */
export function scoreGradRows(ctx: GpuContext, probs: GpuArray, dprobs: GpuArray, rows: number, T: number): void {
  if (rows === 0 || T === 0) return;
  const uses: ArrayUse[] = [
    { name: 'probs', array: probs },
    { name: 'dp', array: dprobs, write: true },
  ];
  dispatchRows(ctx, 'attentionScoreGrad', SCORE_GRAD, uses, rows, { T, heads: 1, causal: false });
}
