import type { Tensor } from '../tensor/tensor.ts';

/** An NHWC array with its height, width and channels (batch = length / (h·w·c)). */
export interface Block {
  data: Float32Array;
  h: number;
  w: number;
  c: number;
}

/**
 * Copies (or, with `add`, adds) the `rows`×`cols` window at (srcRow, srcCol) of `src` into `dst`
 * at (dstRow, dstCol), for every sample and channel. Spatial tiles are cut from images, halos
 * exchanged and tile results put back with it.
 */
export function copyBlock(
  src: Block,
  srcRow: number,
  srcCol: number,
  dst: Block,
  dstRow: number,
  dstCol: number,
  rows: number,
  cols: number,
  add = false,
): void {
  const C = src.c;
  if (dst.c !== C) throw new Error(`copyBlock: ${src.c} channels into ${dst.c}`);
  const n = src.data.length / (src.h * src.w * C);
  const span = cols * C;
  for (let s = 0; s < n; s++) {
    for (let r = 0; r < rows; r++) {
      const from = ((s * src.h + srcRow + r) * src.w + srcCol) * C;
      const to = ((s * dst.h + dstRow + r) * dst.w + dstCol) * C;
      if (add) {
        const d = dst.data,
          x = src.data;
        for (let k = 0; k < span; k++) d[to + k] = d[to + k]! + x[from + k]!;
      } else {
        dst.data.set(src.data.subarray(from, from + span), to);
      }
    }
  }
}

/** An NHWC tensor as a Block. */
export const blockOf = (t: Tensor): Block => ({ data: t.data, h: t.shape[1]!, w: t.shape[2]!, c: t.shape[3]! });
