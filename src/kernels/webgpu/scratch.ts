/**
 * One scratch array per GPU context for kernels' partial results (split reductions): grown when a
 * call needs more, never shrunk. Every use lies within one kernel call's dispatches, which the
 * command stream orders, so calls can share it.
 */
import type { GpuArray } from './gpuArray.ts';
import { gpuView } from './gpuArray.ts';
import type { GpuContext } from './gpuContext.ts';

const pools = new WeakMap<GpuContext, GpuArray>();

/** A view of at least `length` floats of the context's scratch (contents undefined). */
export function scratchArray(ctx: GpuContext, length: number): GpuArray {
  let pool = pools.get(ctx);
  if (!pool || pool.length < length) {
    if (pool) {
      // kernels recorded but not yet submitted still use the old buffer: submit them first
      ctx.flush();
      pool.buffer.destroy();
    }
    pool = ctx.array(Math.max(length, 2 * (pool?.length ?? 0), 1024));
    pools.set(ctx, pool);
  }
  return gpuView(pool, 0, length);
}
