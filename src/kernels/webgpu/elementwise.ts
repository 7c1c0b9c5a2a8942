/**
 * The GPU's per-element and per-row kernels of ElementwiseKernels and MatrixKernels: bias add and
 * its gradient, row copies, axpy and scale. Activations, dropout and softmax cross-entropy have
 * files of their own.
 */
import { bindArrays, cachedShader, linearGroups, linearMain } from './arrayBindings.ts';
import type { ArrayUse } from './arrayBindings.ts';
import { columnSums } from './columnSums.ts';
import type { GpuArray } from './gpuArray.ts';
import type { GpuContext } from './gpuContext.ts';
import { uploadInts } from './hostInts.ts';
import type { Params } from './params.ts';

/** Records a one-thread-per-element kernel over `count`; `fill` writes the Params `fields` in order. */
function linear(
  ctx: GpuContext,
  name: string,
  body: string,
  uses: ArrayUse[],
  count: number,
  fields = '',
  fill: (params: Params) => void = () => {},
): void {
  const bound = bindArrays(uses, `n: u32${fields ? `, ${fields}` : ''}`);
  fill(bound.params.u32(count));
  ctx.dispatch({
    shader: cachedShader(name, bound, () => linearMain('p.n', body)),
    arrays: bound.arrays,
    params: bound.params,
    groups: linearGroups(count),
  });
}

/** Records y[r, c] = x[r, c] + bias[c] over rows×cols (y may be x); the CPU backends' bits. */
export function biasAdd(ctx: GpuContext, x: GpuArray, bias: GpuArray, y: GpuArray, rows: number, cols: number): void {
  const n = rows * cols;
  if (x.length < n || y.length < n || bias.length < cols)
    throw new RangeError(`biasAdd: ${rows}×${cols} but x has ${x.length}, y ${y.length}, bias ${bias.length}`);
  if (n === 0) return;
  const uses = [
    { name: 'x', array: x },
    { name: 'bias', array: bias },
    { name: 'y', array: y, write: true },
  ];
  linear(ctx, 'biasAdd', '  st_y(i, ld_x(i) + ld_bias(i % p.cols));', uses, n, 'cols: u32', (p) => p.u32(cols));
}

/** Records db[c] += Σ_r dy[r, c] (column sums in float32, compensated within each slice of rows). */
export function biasGrad(ctx: GpuContext, dy: GpuArray, db: GpuArray, rows: number, cols: number): void {
  if (dy.length < rows * cols || db.length < cols)
    throw new RangeError(`biasGrad: ${rows}×${cols} but dy has ${dy.length}, db ${db.length}`);
  columnSums(
    ctx,
    {
      name: 'biasGrad',
      inputs: [{ name: 'dy', array: dy }],
      term: '  return vec2f(ld_dy(i), 0.0);',
      terms: 1,
      out: db,
      accumulate: true,
    },
    rows,
    cols,
  );
}

/** Records y += alpha·x over x's length (MatrixKernels.axpy); alpha is rounded to float32. */
export function axpy(ctx: GpuContext, alpha: number, x: GpuArray, y: GpuArray): void {
  const n = x.length;
  if (y.length < n) throw new RangeError(`axpy: y has ${y.length} values, x has ${n}`);
  if (n === 0) return;
  const uses = [
    { name: 'x', array: x },
    { name: 'y', array: y, write: true },
  ];
  linear(ctx, 'axpy', '  st_y(i, ld_y(i) + p.alpha * ld_x(i));', uses, n, 'alpha: f32', (p) => p.f32(alpha));
}

/** Records x *= alpha (MatrixKernels.scale); alpha is rounded to float32. */
export function scale(ctx: GpuContext, alpha: number, x: GpuArray): void {
  if (x.length === 0) return;
  const uses = [{ name: 'x', array: x, write: true }];
  linear(ctx, 'scale', '  st_x(i, ld_x(i) * p.alpha);', uses, x.length, 'alpha: f32', (p) => p.f32(alpha));
}

const COPY_ROWS = /* wgsl */ `
  let row = i / p.width;
  let j = i % p.width;
  let f = ld_starts(row);
  let t = u32(ld_starts(p.count + row)) + j;
  if (f < 0) {
    if (p.add == 0u) { st_to(t, 0.0); }
    return;
  }
  let v = ld_from(u32(f) + j);
  if (p.add != 0u) { st_to(t, ld_to(t) + v); } else { st_to(t, v); }`;

/** Throws unless every row lies inside its array and no two destination rows overlap. */
function checkRows(
  from: GpuArray,
  fromStarts: Int32Array,
  to: GpuArray,
  toStarts: Int32Array,
  count: number,
  width: number,
) {
  checkRowBounds(from, fromStarts, to, toStarts, count, width);
  // the GPU writes every row at once, so a destination written twice would race
  const sorted = toStarts.slice(0, count).sort();
  for (let i = 1; i < count; i++)
    if (sorted[i]! - sorted[i - 1]! < width)
      throw new RangeError(`copyRows: destination rows at ${sorted[i - 1]} and ${sorted[i]} overlap (width ${width})`);
}

/** Throws unless count and width are whole, there are count starts, and every row lies inside its array. */
export function checkRowBounds(
  from: GpuArray,
  fromStarts: Int32Array,
  to: GpuArray,
  toStarts: Int32Array,
  count: number,
  width: number,
): void {
  if (!Number.isInteger(count) || count < 0 || !Number.isInteger(width) || width < 0)
    throw new RangeError(`copyRows: count and width must be non-negative integers, got ${count} and ${width}`);
  if (fromStarts.length < count || toStarts.length < count)
    throw new RangeError(
      `copyRows: ${count} rows need ${count} starts, got ${fromStarts.length} (from) and ${toStarts.length} (to)`,
    );
  for (let i = 0; i < count; i++) {
    const f = fromStarts[i]!,
      t = toStarts[i]!;
    if (f < -1 || f > from.length - width)
      throw new RangeError(`copyRows: row ${i} reads from[${f} … ${f + width}) of ${from.length} values`);
    if (t < 0 || t > to.length - width)
      throw new RangeError(`copyRows: row ${i} writes to[${t} … ${t + width}) of ${to.length} values`);
  }
}

/**
 * Records ElementwiseKernels.copyRows: for i < count the `width` values from to[toStarts[i]] are
 * set to (with `add`: incremented by) those from from[fromStarts[i]]; a from-start of −1 sets zeros
 * (adds nothing). The starts come from the host, which checks every row's bounds, and destination
 * rows must not overlap one another (the rows are written in parallel).
 */
export function copyRows(
  ctx: GpuContext,
  from: GpuArray,
  fromStarts: Int32Array,
  to: GpuArray,
  toStarts: Int32Array,
  count: number,
  width: number,
  add: boolean,
): void {
  checkRows(from, fromStarts, to, toStarts, count, width);
  if (count === 0 || width === 0) return;
  const starts = new Int32Array(2 * count);
  starts.set(fromStarts.subarray(0, count));
  starts.set(toStarts.subarray(0, count), count);
  const uses = [
    { name: 'from', array: from },
    { name: 'starts', array: uploadInts(ctx, starts), int: true },
    { name: 'to', array: to, write: true },
  ];
  linear(ctx, 'copyRows', COPY_ROWS, uses, count * width, 'count: u32, width: u32, add: u32', (p) =>
    p.u32(count).u32(width).u32(+add),
  );
}
