/**
 * Row softmax on the GPU (ElementwiseKernels.softmaxForward/softmaxBackward): one thread per row,
 * in float32 with the row's maximum subtracted so that exp never overflows (the CPU backends sum
 * in float64; a row of K values agrees to a few ulps of K).
 */
import { bindArrays, cachedShader, linearGroups, linearMain } from './arrayBindings.ts';
import type { GpuArray } from './gpuArray.ts';
import type { GpuContext } from './gpuContext.ts';
import { checkRowsOf } from '../js/softmax.ts';

const FORWARD = /* wgsl */ `
  let base = i * p.cols;
  // the maximum as the CPU backends find it: from −Inf (from Params: WGSL has no −Inf constant)
  var m = p.negInf;
  for (var k = 0u; k < p.cols; k++) {
    let v = ld_x(base + k);
    m = select(m, v, v > m);
  }
  var sum = 0.0;
  for (var k = 0u; k < p.cols; k++) { sum += exp(ld_x(base + k) - m); }
  let inv = 1.0 / sum;
  for (var k = 0u; k < p.cols; k++) { st_y(base + k, exp(ld_x(base + k) - m) * inv); }`;

const BACKWARD = /* wgsl */ `
  let base = i * p.cols;
  var dot = 0.0;
  for (var k = 0u; k < p.cols; k++) { dot += ld_dy(base + k) * ld_y(base + k); }
  for (var k = 0u; k < p.cols; k++) { st_dx(base + k, ld_y(base + k) * (ld_dy(base + k) - dot)); }`;

/** Throws where two arrays share a buffer: the rows are read after other threads may have written them. */
function checkApart(fn: string, ...arrays: GpuArray[]): void {
  const out = arrays[arrays.length - 1]!;
  for (const a of arrays.slice(0, -1))
    if (a.buffer === out.buffer && a.offset < out.offset + out.length && out.offset < a.offset + a.length)
      throw new RangeError(`${fn}: the output overlaps an input; give it an array of its own`);
}

/** Records y = softmax(x) over each of `rows` rows of `cols` values (y must not overlap x). */
export function softmaxForward(ctx: GpuContext, x: GpuArray, y: GpuArray, rows: number, cols: number): void {
  checkRowsOf('softmaxForward', rows, cols, x, y);
  checkApart('softmaxForward', x, y);
  if (rows === 0) return;
  const bound = bindArrays(
    [
      { name: 'x', array: x },
      { name: 'y', array: y, write: true },
    ],
    'rows: u32, cols: u32, negInf: f32',
  );
  bound.params.u32(rows).u32(cols).f32(-Infinity);
  ctx.dispatch({
    shader: cachedShader('softmaxForward', bound, () => linearMain('p.rows', FORWARD)),
    arrays: bound.arrays,
    params: bound.params,
    groups: linearGroups(rows),
  });
}

/** Records dx = y ⊙ (dy − Σ_k dy_k·y_k) over each row, from the forward output y (dx must not overlap y or dy). */
export function softmaxBackward(
  ctx: GpuContext,
  y: GpuArray,
  dy: GpuArray,
  dx: GpuArray,
  rows: number,
  cols: number,
): void {
  checkRowsOf('softmaxBackward', rows, cols, y, dy, dx);
  checkApart('softmaxBackward', y, dy, dx);
  if (rows === 0) return;
  const bound = bindArrays(
    [
      { name: 'y', array: y },
      { name: 'dy', array: dy },
      { name: 'dx', array: dx, write: true },
    ],
    'rows: u32, cols: u32',
  );
  bound.params.u32(rows).u32(cols);
  ctx.dispatch({
    shader: cachedShader('softmaxBackward', bound, () => linearMain('p.rows', BACKWARD)),
    arrays: bound.arrays,
    params: bound.params,
    groups: linearGroups(rows),
  });
}
