/**
 * A radix-2 FFT of real input, for the power spectra of audio frames. A real sequence of length n is
 * packed into a complex one of length n/2 (even samples real, odd samples imaginary), transformed by an
 * iterative in-place complex FFT, and split back into the n/2 + 1 bins of the real spectrum: half the
 * work of a complex FFT of length n. Float64 throughout; twiddles and the bit-reversal table are made
 * once per size.
 */

/** The FFT of real frames of one power-of-two length `n`; reuse one per size. */
export class RealFft {
  /** complex length n / 2 */
  private readonly half: number;
  private readonly re: Float64Array;
  private readonly im: Float64Array;
  private readonly bitReverse: Uint32Array;
  /** cos/sin of −2πk/half for the complex FFT, k < half/2 */
  private readonly cosHalf: Float64Array;
  private readonly sinHalf: Float64Array;
  /** cos/sin of −2πk/n for the split, k ≤ n/2 */
  private readonly cosFull: Float64Array;
  private readonly sinFull: Float64Array;

  constructor(readonly n: number) {
    if (!Number.isInteger(n) || n < 2 || (n & (n - 1)) !== 0)
      throw new Error(`RealFft: the length must be a power of two ≥ 2, got ${n}`);
    const half = n / 2;
    this.half = half;
    this.re = new Float64Array(half);
    this.im = new Float64Array(half);
    this.bitReverse = new Uint32Array(half);
    const bits = Math.log2(half);
    for (let i = 0; i < half; i++) {
      let r = 0;
      for (let b = 0; b < bits; b++) r |= ((i >>> b) & 1) << (bits - 1 - b);
      this.bitReverse[i] = r;
    }
    this.cosHalf = new Float64Array(Math.max(1, half / 2));
    this.sinHalf = new Float64Array(Math.max(1, half / 2));
    for (let k = 0; k < half / 2; k++) {
      this.cosHalf[k] = Math.cos((-2 * Math.PI * k) / half);
      this.sinHalf[k] = Math.sin((-2 * Math.PI * k) / half);
    }
    this.cosFull = new Float64Array(half + 1);
    this.sinFull = new Float64Array(half + 1);
    for (let k = 0; k <= half; k++) {
      this.cosFull[k] = Math.cos((-2 * Math.PI * k) / n);
      this.sinFull[k] = Math.sin((-2 * Math.PI * k) / n);
    }
  }

  /** The n/2 + 1 bins X[k] = Σ x[t]·e^(−2πikt/n), k = 0 … n/2, as real and imaginary parts. */
  transform(input: ArrayLike<number>, outRe: Float64Array, outIm: Float64Array): void {
    const { half, re, im } = this;
    if (input.length !== this.n) throw new Error(`RealFft(${this.n}): the input has ${input.length} values`);
    if (outRe.length < half + 1 || outIm.length < half + 1)
      throw new Error(`RealFft(${this.n}): the outputs need ${half + 1} values`);
    for (let i = 0; i < half; i++) {
      const j = this.bitReverse[i]!;
      re[j] = input[2 * i]!;
      im[j] = input[2 * i + 1]!;
    }
    this.complexInPlace();
    // split: X[k] = (Z[k] + conj Z[h−k])/2 − i·e^(−2πik/n)·(Z[k] − conj Z[h−k])/2, with Z[h] = Z[0]
    for (let k = 0; k <= half; k++) {
      const a = k === half ? 0 : k;
      const b = k === 0 ? 0 : half - k;
      const zr = re[a]!,
        zi = im[a]!,
        cr = re[b]!,
        ci = -im[b]!;
      const evenRe = (zr + cr) / 2,
        evenIm = (zi + ci) / 2;
      const oddRe = (zi - ci) / 2,
        oddIm = -(zr - cr) / 2; // (Z − conj Z')/(2i)
      const wr = this.cosFull[k]!,
        wi = this.sinFull[k]!;
      outRe[k] = evenRe + (wr * oddRe - wi * oddIm);
      outIm[k] = evenIm + (wr * oddIm + wi * oddRe);
    }
  }

  /** |X[k]|², k = 0 … n/2, into `out` (n/2 + 1 values). */
  powerSpectrum(
    input: ArrayLike<number>,
    out: Float64Array,
    scratchRe = new Float64Array(this.half + 1),
    scratchIm = new Float64Array(this.half + 1),
  ): void {
    this.transform(input, scratchRe, scratchIm);
    for (let k = 0; k <= this.half; k++) out[k] = scratchRe[k]! * scratchRe[k]! + scratchIm[k]! * scratchIm[k]!;
  }

  /** Iterative radix-2 decimation-in-time on re/im, already in bit-reversed order. */
  private complexInPlace(): void {
    const { half, re, im, cosHalf, sinHalf } = this;
    for (let size = 2; size <= half; size *= 2) {
      const step = half / size;
      const span = size / 2;
      for (let start = 0; start < half; start += size) {
        for (let j = 0; j < span; j++) {
          const wr = cosHalf[j * step]!,
            wi = sinHalf[j * step]!;
          const p = start + j,
            q = p + span;
          const tr = wr * re[q]! - wi * im[q]!;
          const ti = wr * im[q]! + wi * re[q]!;
          re[q] = re[p]! - tr;
          im[q] = im[p]! - ti;
          re[p] = re[p]! + tr;
          im[p] = im[p]! + ti;
        }
      }
    }
  }
}
