import type { Backend } from '../src/kernels/backend.ts';

/** `n` values in [−1, 1) from an xorshift stream of `seed`, in an array of `b` (on its device too). */
export function filled(b: Backend, n: number, seed: number): Float32Array {
  const a = b.alloc(n);
  let s = seed >>> 0 || 1;
  for (let i = 0; i < n; i++) {
    s ^= s << 13;
    s >>>= 0;
    s ^= s >>> 17;
    s ^= s << 5;
    s >>>= 0;
    a[i] = (s / 4294967296) * 2 - 1;
  }
  b.device?.fromHost([a]); // a GPU backend computes on its own copy
  return a;
}
