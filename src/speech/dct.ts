/**
 * The orthonormal DCT-II that turns log mel energies into cepstra, as a matrix product folded in half:
 * row k of the matrix is symmetric in j ↔ n−1−j for even k and antisymmetric for odd k, so with
 * u_j = e_j + e_(n−1−j) and v_j = e_j − e_(n−1−j) each coefficient is a product of length ⌈n/2⌉ —
 * half the multiplications of the plain product, the same values up to rounding.
 */

/** The orthonormal DCT-II rows k < count for n inputs: s_k·cos(πk(j + ½)/n), s_0 = √(1/n), s_k = √(2/n). */
export function dctMatrix(count: number, n: number): Float64Array {
  const m = new Float64Array(count * n);
  for (let k = 0; k < count; k++) {
    const s = Math.sqrt((k === 0 ? 1 : 2) / n);
    for (let j = 0; j < n; j++) m[k * n + j] = s * Math.cos((Math.PI * k * (j + 0.5)) / n);
  }
  return m;
}

/** The first `count` DCT-II coefficients of `n` values; build once, reuse (not reentrant). */
export class FoldedDct {
  /** ⌈n/2⌉ */
  private readonly width: number;
  /** row k: the first ⌈n/2⌉ entries of the matrix's row k (the middle one 0 for odd k and odd n) */
  private readonly folded: Float64Array;
  private readonly sums: Float64Array;
  private readonly differences: Float64Array;

  constructor(
    readonly count: number,
    readonly n: number,
  ) {
    const full = dctMatrix(count, n);
    const width = Math.ceil(n / 2);
    this.width = width;
    this.folded = new Float64Array(count * width);
    for (let k = 0; k < count; k++)
      for (let j = 0; j < width; j++)
        this.folded[k * width + j] = n % 2 === 1 && j === width - 1 && k % 2 === 1 ? 0 : full[k * n + j]!;
    this.sums = new Float64Array(width);
    this.differences = new Float64Array(width);
  }

  /** Coefficients 0 … count−1 of `input` (n values), each times `scale[k]` when given, into out[at + k]. */
  apply(input: Float64Array, out: Float32Array, at: number, scale?: Float64Array): void {
    const { n, width, folded, sums, differences } = this;
    for (let j = 0; j < n >> 1; j++) {
      const a = input[j]!,
        b = input[n - 1 - j]!;
      sums[j] = a + b;
      differences[j] = a - b;
    }
    if (n % 2 === 1) {
      sums[width - 1] = input[width - 1]!;
      differences[width - 1] = 0;
    }
    for (let k = 0, row = 0; k < this.count; k++, row += width) {
      const folds = k % 2 === 0 ? sums : differences;
      let c = 0;
      for (let j = 0; j < width; j++) c += folded[row + j]! * folds[j]!;
      out[at + k] = scale ? c * scale[k]! : c;
    }
  }
}
