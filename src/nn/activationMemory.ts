import type { Layer } from './layer.ts';

/**
 * Activation memory: after a training forward, the bytes of the distinct batch-sized arrays the
 * layers keep for backward (their inputs and outputs where backward reads them, dropout masks,
 * BatchNorm's x̂, max-pool argmax). Backward's gradient scratch is not counted. This is what
 * micro-batching divides.
 */
export function savedActivationBytes(layers: readonly Layer[]): number {
  const seen = new Map<ArrayBufferLike, Set<string>>();
  let bytes = 0;
  for (const layer of layers) {
    for (const a of layer.savedForBackward?.() ?? []) {
      let set = seen.get(a.buffer);
      if (!set) {
        set = new Set();
        seen.set(a.buffer, set);
      }
      const key = `${a.byteOffset}:${a.byteLength}`;
      if (set.has(key)) continue;
      set.add(key);
      bytes += a.byteLength;
    }
  }
  return bytes;
}
