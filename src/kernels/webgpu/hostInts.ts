/**
 * Small int32 arrays a kernel takes from the host (class labels, row starts, valid-row flags),
 * copied into one array per GPU context that grows when a call needs more. The copy goes through
 * the command stream, so it lands after the kernels recorded before it and a later call's copy
 * cannot overwrite what an earlier kernel still reads.
 */
import type { GpuArray } from './gpuArray.ts';
import { gpuView } from './gpuArray.ts';
import type { GpuContext } from './gpuContext.ts';

const pools = new WeakMap<GpuContext, GpuArray>();

/** A view holding `ints` (their bits, for a shader's `array<i32>`), valid until the next call. */
export function uploadInts(ctx: GpuContext, ints: Int32Array): GpuArray {
  let pool = pools.get(ctx);
  if (!pool || pool.length < ints.length) {
    if (pool) {
      // kernels recorded but not yet submitted still read the old buffer: submit them first
      ctx.flush();
      pool.buffer.destroy();
    }
    pool = ctx.array(Math.max(ints.length, 2 * (pool?.length ?? 0), 256));
    pools.set(ctx, pool);
  }
  const view = gpuView(pool, 0, ints.length);
  // same-type copies keep the bits, so the int32s arrive intact through a Float32Array
  if (ints.length > 0) ctx.upload(new Float32Array(ints.buffer, ints.byteOffset, ints.length), view);
  return view;
}
