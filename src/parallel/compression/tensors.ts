/**
 * The weight tensors of a flat gradient, as gradient compression sees them: each tensor of two or
 * more dimensions is a matrix of shape[0] rows × the product of the rest (row-major, as the flat
 * buffer holds it, and as PyTorch's PowerSGD reshapes a weight); a tensor of one dimension (a bias,
 * a norm's scale) is a vector. What lies between tensors (alignment padding) belongs to none.
 */
import type { ParamTensor } from '../strategy.ts';

/** One tensor of the flat buffer: where it lies and, for a matrix, its rows and columns. */
export interface TensorPlace {
  offset: number;
  size: number;
  /** rows × cols = size for a matrix; a vector has rows = 1, cols = size and matrix false */
  rows: number;
  cols: number;
  matrix: boolean;
}

/**
 * The tensors that lie wholly inside [0, n), in offset order. Without tensors (a replica that does
 * not say where its weights are) the whole buffer is one vector.
 */
export function tensorPlaces(n: number, tensors: readonly ParamTensor[] | undefined): TensorPlace[] {
  if (!tensors) return n > 0 ? [{ offset: 0, size: n, rows: 1, cols: n, matrix: false }] : [];
  const out: TensorPlace[] = [];
  for (const t of [...tensors].sort((a, b) => a.offset - b.offset)) {
    const size = t.shape.reduce((a, b) => a * b, 1);
    if (size === 0 || t.offset + size > n) continue;
    const matrix = t.shape.length >= 2;
    const rows = matrix ? t.shape[0]! : 1;
    out.push({ offset: t.offset, size, rows, cols: size / rows, matrix });
  }
  return out;
}

/** The parts of [0, n) outside every tensor of `places` (padding; the whole buffer when there is none). */
export function gaps(n: number, places: readonly TensorPlace[]): { start: number; end: number }[] {
  const out: { start: number; end: number }[] = [];
  let at = 0;
  for (const p of places) {
    if (p.offset > at) out.push({ start: at, end: p.offset });
    at = Math.max(at, p.offset + p.size);
  }
  if (n > at) out.push({ start: at, end: n });
  return out;
}
