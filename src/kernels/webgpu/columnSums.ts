/**
 * Per-column sums over the rows of a [rows, C] matrix (channels last), of one or two terms per
 * element: a bias gradient, batch normalisation's statistics. Workgroups of 16 columns × 16 row
 * lanes each sum a slice of the rows (compensated sums in each lane, then a tree over the lanes);
 * with several slices, a second pass adds the slices' partials in order. No atomics: the result
 * does not depend on scheduling.
 */
import type { ArrayUse } from './arrayBindings.ts';
import { bindArrays, cachedShader, linearGroups, linearMain } from './arrayBindings.ts';
import type { GpuArray } from './gpuArray.ts';
import type { GpuContext } from './gpuContext.ts';
import { scratchArray } from './scratch.ts';

/** Rows a workgroup sums (64 per lane) before the rows are split over more workgroups. */
const ROWS_PER_SLICE = 1024;

export interface ColumnTerms {
  /** a name for the shader cache, one per `term` text */
  name: string;
  /** the arrays `term` reads (read-only) */
  inputs: ArrayUse[];
  /** WGSL body of `fn term(i: u32, c: u32) -> vec2f`: element i = r·C + c's terms (the 2nd 0 when one) */
  term: string;
  /** 1 or 2 */
  terms: number;
  /** out[t·C + c] = Σ_r term t, or += with `accumulate` */
  out: GpuArray;
  accumulate: boolean;
}

/** Records out[t·C + c] (+)= Σ_{r < rows} term_t(r·C + c, c). */
export function columnSums(ctx: GpuContext, spec: ColumnTerms, rows: number, C: number): void {
  if (C === 0) return;
  const rowsPerSlice = Math.max(ROWS_PER_SLICE, Math.ceil(rows / 65535));
  const slices = Math.max(1, Math.ceil(rows / rowsPerSlice));
  const direct = slices === 1;
  const partial = direct ? spec.out : scratchArray(ctx, slices * spec.terms * C);
  const sliceUses: ArrayUse[] = [...spec.inputs, { name: 'out', array: partial, write: true }];
  const bound = bindArrays(sliceUses, 'rows: u32, C: u32, rowsPerSlice: u32, terms: u32, direct: u32, accumulate: u32');
  const shader = cachedShader(`columnSums.${spec.name}`, bound, () => sliceShader(spec.term));
  bound.params.u32(rows).u32(C).u32(rowsPerSlice).u32(spec.terms).u32(+direct).u32(+spec.accumulate);
  ctx.dispatch({ shader, arrays: bound.arrays, params: bound.params, groups: [Math.ceil(C / 16), slices] });
  if (!direct) addSlices(ctx, partial, slices, spec.out, spec.terms * C, spec.accumulate);
}

/** Records out[i] (+)= Σ_{k < slices} partial[k·count + i], the slices added in order. */
export function addSlices(
  ctx: GpuContext,
  partial: GpuArray,
  slices: number,
  out: GpuArray,
  count: number,
  accumulate: boolean,
): void {
  const bound = bindArrays(
    [
      { name: 'partial', array: partial },
      { name: 'out', array: out, write: true },
    ],
    'count: u32, slices: u32, accumulate: u32',
  );
  const shader = cachedShader('addSlices', bound, () => ADD_SLICES);
  bound.params.u32(count).u32(slices).u32(+accumulate);
  ctx.dispatch({ shader, arrays: bound.arrays, params: bound.params, groups: linearGroups(count) });
}

function sliceShader(term: string): string {
  return /* wgsl */ `
fn term(i: u32, c: u32) -> vec2f {
${term}
}
var<workgroup> lanes: array<array<vec2f, 16>, 16>;

@compute @workgroup_size(16, 16)
fn main(@builtin(workgroup_id) wg: vec3u, @builtin(local_invocation_id) l: vec3u) {
  let c = wg.x * 16u + l.x;
  let r0 = wg.y * p.rowsPerSlice;
  let r1 = min(p.rows, r0 + p.rowsPerSlice);
  // Kahan: the lane's sum and the low-order part it lost
  var sum = vec2f(0.0);
  var lost = vec2f(0.0);
  if (c < p.C) {
    for (var r = r0 + l.y; r < r1; r += 16u) {
      let y = term(r * p.C + c, c) - lost;
      let t = sum + y;
      lost = (t - sum) - y;
      sum = t;
    }
  }
  lanes[l.y][l.x] = sum - lost;
  workgroupBarrier();
  for (var half = 8u; half > 0u; half >>= 1u) {
    if (l.y < half) { lanes[l.y][l.x] += lanes[l.y + half][l.x]; }
    workgroupBarrier();
  }
  if (l.y != 0u || c >= p.C) { return; }
  let s = lanes[0][l.x];
  for (var t = 0u; t < p.terms; t++) {
    if (p.direct == 0u) {
      st_out((wg.y * p.terms + t) * p.C + c, s[t]);
    } else if (p.accumulate != 0u) {
      st_out(t * p.C + c, ld_out(t * p.C + c) + s[t]);
    } else {
      st_out(t * p.C + c, s[t]);
    }
  }
}`;
}

const ADD_SLICES = linearMain(
  'p.count',
  /* wgsl */ `
  var s = 0.0;
  for (var k = 0u; k < p.slices; k++) { s += ld_partial(k * p.count + i); }
  if (p.accumulate != 0u) { s = ld_out(i) + s; }
  st_out(i, s);`,
);
