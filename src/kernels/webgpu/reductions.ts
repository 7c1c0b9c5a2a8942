/**
 * Whole-array reductions on the GPU for the update's guards: the squared L2 norm of gradients (for
 * clipping by global norm) and whether any value is NaN or ±Inf. Sums take two passes without
 * atomics — workgroups of 256 each reduce a strided share into a partial, then one workgroup adds
 * the partials in a fixed order — so a result does not depend on scheduling.
 */
import { bindArrays, cachedShader, linearGroups, linearMain } from './arrayBindings.ts';
import type { GpuArray } from './gpuArray.ts';
import { gpuView } from './gpuArray.ts';
import type { GpuContext } from './gpuContext.ts';
import { scratchArray } from './scratch.ts';

const WORKGROUP = 256;
/** Workgroups per array in the first pass: enough threads to fill a large GPU, few partials to add. */
const MAX_PARTIALS = 1024;

function sumShader(square: boolean): string {
  return /* wgsl */ `
var<workgroup> acc: array<f32, ${WORKGROUP}>;

@compute @workgroup_size(${WORKGROUP})
fn main(@builtin(local_invocation_index) l: u32, @builtin(workgroup_id) wg: vec3u,
        @builtin(num_workgroups) groups: vec3u) {
  var s = 0.0;
  for (var i = wg.x * ${WORKGROUP}u + l; i < p.n; i += groups.x * ${WORKGROUP}u) {
    let v = ld_x(i);
    s += ${square ? 'v * v' : 'v'};
  }
  acc[l] = s;
  workgroupBarrier();
  for (var half = ${WORKGROUP / 2}u; half > 0u; half >>= 1u) {
    if (l < half) { acc[l] += acc[l + half]; }
    workgroupBarrier();
  }
  if (l == 0u) { st_part(wg.x, acc[0]); }
}`;
}

/** The first pass's partials for an array of n values. */
export function partialCount(n: number): number {
  return Math.min(Math.ceil(n / WORKGROUP), MAX_PARTIALS);
}

/** Records part[g] = the sum (of squares) of workgroup g's share of x, for g < groups. */
function reduce(ctx: GpuContext, x: GpuArray, part: GpuArray, groups: number, square: boolean): void {
  const bound = bindArrays(
    [
      { name: 'x', array: x },
      { name: 'part', array: part, write: true },
    ],
    'n: u32',
  );
  const shader = cachedShader(square ? 'sumOfSquares' : 'sum', bound, () => sumShader(square));
  bound.params.u32(x.length);
  ctx.dispatch({ shader, arrays: bound.arrays, params: bound.params, groups: [groups] });
}

/**
 * Records out[0] = Σ over every array of Σ x (Σ x² with `square`), in float32. `partials` holds at
 * least Σ partialCount(length) floats and may not overlap the arrays or out.
 */
export function sumInto(ctx: GpuContext, arrays: GpuArray[], out: GpuArray, square: boolean, partials: GpuArray): void {
  let at = 0;
  for (const x of arrays) {
    const groups = partialCount(x.length);
    if (groups === 0) continue;
    reduce(ctx, x, gpuView(partials, at, groups), groups, square);
    at += groups;
  }
  reduce(ctx, gpuView(partials, 0, at), gpuView(out, 0, 1), 1, false);
}

/**
 * Records out[0] = Σ x² over every element of every array: the squared global norm that clipping
 * by norm reads (sumOfSquares of src/optim/clipGradNorm.ts, summed over the gradients). The sum is
 * float32, so a norm above ~1.8e19 reads as Infinity, which the non-finite guard treats as a bad step.
 */
export function sumOfSquares(ctx: GpuContext, arrays: GpuArray[], out: GpuArray): void {
  if (out.length < 1) throw new RangeError('sumOfSquares: out must hold one value');
  const total = arrays.reduce((s, x) => s + partialCount(x.length), 0);
  sumInto(ctx, arrays, out, true, scratchArray(ctx, Math.max(total, 1)));
}

// NaN and ±Inf are the values with every exponent bit set: tested on the bits, as WGSL lets a
// compiler assume that float comparisons never meet a NaN
const CLEAR_FLAG = linearMain('1u', '  st_flag(0u, 0.0);');
const MARK_NON_FINITE = linearMain(
  'p.n',
  `  if ((bitcast<u32>(ld_x(i)) & 0x7f800000u) == 0x7f800000u) { st_flag(0u, 1.0); }`,
);

/** Records flag[0] = 1 when any element of any array is NaN or ±Inf, else 0 (allFinite's negation). */
export function anyNonFinite(ctx: GpuContext, arrays: GpuArray[], flag: GpuArray): void {
  if (flag.length < 1) throw new RangeError('anyNonFinite: flag must hold one value');
  const clear = bindArrays([{ name: 'flag', array: flag, write: true }], '');
  ctx.dispatch({
    shader: cachedShader('clearFlag', clear, () => CLEAR_FLAG),
    arrays: clear.arrays,
    params: clear.params,
    groups: [1],
  });
  for (const x of arrays) {
    if (x.length === 0) continue;
    // every thread that finds one writes the same 1: no ordering between them matters
    const bound = bindArrays(
      [
        { name: 'x', array: x },
        { name: 'flag', array: flag, write: true },
      ],
      'n: u32',
    );
    bound.params.u32(x.length);
    const shader = cachedShader('markNonFinite', bound, () => MARK_NON_FINITE);
    ctx.dispatch({ shader, arrays: bound.arrays, params: bound.params, groups: linearGroups(x.length) });
  }
}
