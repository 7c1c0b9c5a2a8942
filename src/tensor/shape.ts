export type Shape = readonly number[];

export function shapeSize(shape: Shape): number {
  let n = 1;
  for (const d of shape) n *= d;
  return n;
}

/**
 * A dimension whose size each batch decides: the frames of a variable-length sequence input,
 * written `null` in a config (`model.input: [null, 26]`). Never the size of a tensor.
 */
export const VARIABLE = -1;

/** `[28, 28, 1]`; a variable dimension prints as `null`, as a config writes it. */
export function formatShape(shape: Shape): string {
  return `[${shape.map((d) => (d === VARIABLE ? 'null' : d)).join(', ')}]`;
}

export function shapesEqual(a: Shape, b: Shape): boolean {
  return a.length === b.length && a.every((d, i) => d === b[i]);
}

/** Output length of a convolution or pooling window along one axis. */
export function windowOutputSize(input: number, kernel: number, stride: number, padding: 'valid' | 'same'): number {
  return padding === 'same' ? Math.ceil(input / stride) : Math.floor((input - kernel) / stride) + 1;
}

/** Leading (top/left) padding for 'same' windows, TensorFlow's convention: the extra pixel goes at the end. */
export function samePaddingBefore(input: number, kernel: number, stride: number): number {
  const out = Math.ceil(input / stride);
  const total = Math.max((out - 1) * stride + kernel - input, 0);
  return Math.floor(total / 2);
}

/**
 * The part [start, end) of `n` items that part `index` of `parts` gets: as even as possible, the
 * first parts take the extra item (collectives' owned slices, a rank's slice of a global batch,
 * spatial tiles, micro-batches).
 */
export function evenSlice(n: number, parts: number, index: number): { start: number; end: number } {
  const base = Math.floor(n / parts),
    extra = n % parts;
  const start = index * base + Math.min(index, extra);
  return { start, end: start + base + (index < extra ? 1 : 0) };
}
