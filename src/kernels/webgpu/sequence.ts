/**
 * SequenceKernels on the GPU: a fill of a view and the zeroing of each sample's padding frames,
 * one thread per element (the CPU backends' bits: they only write a constant).
 */
import type { ArrayUse } from './arrayBindings.ts';
import { bindArrays, cachedShader, linearGroups, linearMain } from './arrayBindings.ts';
import type { GpuArray } from './gpuArray.ts';
import type { GpuContext } from './gpuContext.ts';
import { uploadInts } from './hostInts.ts';
import type { Params } from './params.ts';

/** Records a one-thread-per-element kernel over `count`; `write` fills the Params `fields` in order. */
function perElement(
  ctx: GpuContext,
  name: string,
  body: string,
  uses: ArrayUse[],
  count: number,
  fields: string,
  write: (params: Params) => void,
): void {
  const bound = bindArrays(uses, `n: u32, ${fields}`);
  write(bound.params.u32(count));
  ctx.dispatch({
    shader: cachedShader(name, bound, () => linearMain('p.n', body)),
    arrays: bound.arrays,
    params: bound.params,
    groups: linearGroups(count),
  });
}

/** Records x[i] = value over all of x (SequenceKernels.fill); value is rounded to float32. */
export function fill(ctx: GpuContext, x: GpuArray, value: number): void {
  if (x.length === 0) return;
  perElement(ctx, 'fill', '  st_x(i, p.value);', [{ name: 'x', array: x, write: true }], x.length, 'value: f32', (p) =>
    p.f32(value),
  );
}

const ZERO_PADDING = /* wgsl */ `
  let frame = i / p.F;
  if (i32(frame % p.T) >= ld_lengths(frame / p.T)) { st_x(i, 0.0); }`;

/**
 * Records the zeroing of frames t ≥ lengths[n] of x [N, T, F] (SequenceKernels.zeroPadding); the
 * lengths come from the host, which checks them.
 */
export function zeroPadding(ctx: GpuContext, x: GpuArray, N: number, T: number, F: number, lengths: Int32Array): void {
  const n = N * T * F;
  if (x.length < n || lengths.length < N)
    throw new RangeError(`zeroPadding: [${N}, ${T}, ${F}] but x has ${x.length} values, lengths ${lengths.length}`);
  for (let s = 0; s < N; s++)
    if (!(lengths[s]! >= 0 && lengths[s]! <= T))
      throw new RangeError(`zeroPadding: sample ${s} has length ${lengths[s]} of ${T} frames`);
  if (n === 0) return;
  const uses = [
    { name: 'lengths', array: uploadInts(ctx, lengths.subarray(0, N)), int: true },
    { name: 'x', array: x, write: true },
  ];
  perElement(ctx, 'zeroPadding', ZERO_PADDING, uses, n, 'T: u32, F: u32', (p) => p.u32(T).u32(F));
}
