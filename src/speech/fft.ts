/**
 * A power-of-two FFT of real input, for the power spectra of audio frames. A real sequence of length n
 * is packed into a complex one of length h = n/2 (even samples real, odd samples imaginary), put in
 * bit-reversed order, transformed in place by radix-4 passes (one radix-2 pass first when h is an odd
 * power of two), and split back into the n/2 + 1 bins of the real spectrum: half the work of a complex
 * FFT of length n, and a quarter fewer multiplications than radix 2. Float64 throughout; the twiddles
 * of every pass and the bit-reversal table are computed once per size, nothing is allocated per call.
 */

/** The FFT of real frames of one power-of-two length `n`; reuse one per size. */
export class RealFft {
  /** complex length n / 2 */
  private readonly half: number;
  private readonly re: Float64Array;
  private readonly im: Float64Array;
  private readonly bitReverse: Uint32Array;
  /** whether the first pass is radix 2 (h an odd power of two) rather than radix 4 */
  private readonly radix2First: boolean;
  /** per radix-4 pass after the first, of quarter-span s (2 or 4, then ×4 up to h/4), for j < s: cos/sin of −2π·m·j/(4s), m = 1, 2, 3, interleaved */
  private readonly twiddles: Float64Array;
  /** cos/sin of −2πk/n for the split, k ≤ n/2 */
  private readonly cosFull: Float64Array;
  private readonly sinFull: Float64Array;
  /** n ones: the window of a plain transform */
  private readonly ones: Float64Array;

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
    this.radix2First = bits % 2 === 1;
    const spans: number[] = [];
    for (let s = this.radix2First ? 2 : 4; 4 * s <= half; s *= 4) spans.push(s);
    this.twiddles = new Float64Array(6 * spans.reduce((a, s) => a + s, 0));
    let at = 0;
    for (const s of spans) {
      for (let j = 0; j < s; j++) {
        for (let m = 1; m <= 3; m++) {
          const angle = (-2 * Math.PI * m * j) / (4 * s);
          this.twiddles[at++] = Math.cos(angle);
          this.twiddles[at++] = Math.sin(angle);
        }
      }
    }
    this.ones = new Float64Array(n).fill(1);
    this.cosFull = new Float64Array(half + 1);
    this.sinFull = new Float64Array(half + 1);
    for (let k = 0; k <= half; k++) {
      this.cosFull[k] = Math.cos((-2 * Math.PI * k) / n);
      this.sinFull[k] = Math.sin((-2 * Math.PI * k) / n);
    }
  }

  /** The n/2 + 1 bins X[k] = Σ x[t]·e^(−2πikt/n), k = 0 … n/2, as real and imaginary parts. */
  transform(input: ArrayLike<number>, outRe: Float64Array, outIm: Float64Array): void {
    const { half, re, im, cosFull, sinFull } = this;
    if (outRe.length < half + 1 || outIm.length < half + 1)
      throw new Error(`RealFft(${this.n}): the outputs need ${half + 1} values`);
    this.complexTransform(input);
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
      const wr = cosFull[k]!,
        wi = sinFull[k]!;
      outRe[k] = evenRe + (wr * oddRe - wi * oddIm);
      outIm[k] = evenIm + (wr * oddIm + wi * oddRe);
    }
  }

  /**
   * |X[k]|², k = 0 … n/2, into `out` (n/2 + 1 values): the split and the squares in one pass, bins k
   * and h − k together (they read the same two complex values). With `start` and `window` (n values)
   * the transformed frame is input[start + t]·window[t], read as the first pass loads it: windowing
   * an audio frame without writing it out first.
   */
  powerSpectrum(input: ArrayLike<number>, out: Float64Array, start = 0, window: Float64Array = this.ones): void {
    const { half, re, im, cosFull, sinFull } = this;
    if (out.length < half + 1) throw new Error(`RealFft(${this.n}): the output needs ${half + 1} values`);
    this.complexTransform(input, start, window);
    // X[0] = Re Z[0] + Im Z[0], X[h] = Re Z[0] − Im Z[0]
    out[0] = (re[0]! + im[0]!) ** 2;
    out[half] = (re[0]! - im[0]!) ** 2;
    for (let k = 1; 2 * k <= half; k++) {
      const j = half - k;
      const zr = re[k]!,
        zi = im[k]!,
        yr = re[j]!,
        yi = im[j]!;
      // Z = Z[k], Y = Z[h−k]: even = (Z + conj Y)/2, odd = (Z − conj Y)/(2i); for bin h−k they are conj even, conj odd
      const evenRe = 0.5 * (zr + yr),
        evenIm = 0.5 * (zi - yi),
        oddRe = 0.5 * (zi + yi),
        oddIm = -0.5 * (zr - yr);
      const wr = cosFull[k]!,
        wi = sinFull[k]!,
        vr = cosFull[j]!,
        vi = sinFull[j]!;
      const xr = evenRe + (wr * oddRe - wi * oddIm),
        xi = evenIm + (wr * oddIm + wi * oddRe);
      const xjr = evenRe + (vr * oddRe + vi * oddIm),
        xji = -evenIm + (vi * oddRe - vr * oddIm);
      out[k] = xr * xr + xi * xi;
      out[j] = xjr * xjr + xji * xji;
    }
  }

  /**
   * Transforms input[start + t]·w[t], t < n (n reals read as h complex values), into re/im. The
   * first pass reads straight from the input in bit-reversed order (bit reversal is its own inverse: position p takes complex
   * input bitReverse[p]) and needs no twiddles: radix 2 when h is an odd power of two, else radix 4.
   */
  private complexTransform(input: ArrayLike<number>, start = 0, w: Float64Array = this.ones): void {
    const { half, re, im, bitReverse } = this;
    if (w.length !== this.n) throw new Error(`RealFft(${this.n}): the window has ${w.length} values`);
    if (start < 0 || start + this.n > input.length || (w === this.ones && start === 0 && input.length !== this.n))
      throw new Error(
        `RealFft(${this.n}): the input has ${input.length} values, the frame is ${start} … ${start + this.n - 1}`,
      );
    if (half === 1) {
      re[0] = input[start]! * w[0]!;
      im[0] = input[start + 1]! * w[1]!;
      return;
    }
    if (this.radix2First) {
      for (let p = 0; p < half; p += 2) {
        const i0 = 2 * bitReverse[p]!,
          i1 = 2 * bitReverse[p + 1]!;
        const ar = input[start + i0]! * w[i0]!,
          ai = input[start + i0 + 1]! * w[i0 + 1]!,
          br = input[start + i1]! * w[i1]!,
          bi = input[start + i1 + 1]! * w[i1 + 1]!;
        re[p] = ar + br;
        im[p] = ai + bi;
        re[p + 1] = ar - br;
        im[p + 1] = ai - bi;
      }
      this.radix4Passes(2);
      return;
    }
    for (let p = 0; p < half; p += 4) {
      // positions p … p+3 hold the inputs ≡ 0, 2, 1, 3 (mod 4) of the block: A, B, C, D with unit twiddles
      // p … p+3 differ in their two low bits, so their reversals differ by h/2, h/4, 3h/4
      const ia = 2 * bitReverse[p]!,
        ib = ia + half,
        ic = ia + (half >> 1),
        id = ib + (half >> 1);
      const Ar = input[start + ia]! * w[ia]!,
        Ai = input[start + ia + 1]! * w[ia + 1]!,
        Br = input[start + ib]! * w[ib]!,
        Bi = input[start + ib + 1]! * w[ib + 1]!,
        Cr = input[start + ic]! * w[ic]!,
        Ci = input[start + ic + 1]! * w[ic + 1]!,
        Dr = input[start + id]! * w[id]!,
        Di = input[start + id + 1]! * w[id + 1]!;
      const t0r = Ar + Br,
        t0i = Ai + Bi,
        t1r = Ar - Br,
        t1i = Ai - Bi,
        t2r = Cr + Dr,
        t2i = Ci + Di,
        t3r = Cr - Dr,
        t3i = Ci - Di;
      re[p] = t0r + t2r;
      im[p] = t0i + t2i;
      re[p + 2] = t0r - t2r;
      im[p + 2] = t0i - t2i;
      re[p + 1] = t1r + t3i;
      im[p + 1] = t1i - t3r;
      re[p + 3] = t1r - t3i;
      im[p + 3] = t1i + t3r;
    }
    this.radix4Passes(4);
  }

  /**
   * Radix-4 decimation-in-time passes from quarter-span `first` up. In bit-reversed order a block of
   * 4s holds the length-s transforms A, B, C, D of the inputs ≡ 0, 2, 1, 3 (mod 4); with
   * b = W^2j·B, c = W^j·C, d = W^3j·D (W = e^(−2πi/4s)) the block's outputs j, j+s, j+2s, j+3s are
   * (A + b) + (c + d), (A − b) − i(c − d), (A + b) − (c + d), (A − b) + i(c − d).
   */
  private radix4Passes(first: number): void {
    const { half, re, im, twiddles } = this;
    let tw = 0;
    for (let s = first; 4 * s <= half; s *= 4) {
      const block = 4 * s;
      // j outside: each twiddle triple is loaded once per pass, not once per block
      for (let j = 0, t = tw; j < s; j++, t += 6) {
        const w1r = twiddles[t]!,
          w1i = twiddles[t + 1]!,
          w2r = twiddles[t + 2]!,
          w2i = twiddles[t + 3]!,
          w3r = twiddles[t + 4]!,
          w3i = twiddles[t + 5]!;
        for (let a = j; a < half; a += block) {
          const b = a + s,
            c = b + s,
            d = c + s;
          // position b holds B (inputs ≡ 2 mod 4), position c holds C (≡ 1 mod 4)
          const Br = re[b]!,
            Bi = im[b]!,
            Cr = re[c]!,
            Ci = im[c]!,
            Dr = re[d]!,
            Di = im[d]!;
          const br = w2r * Br - w2i * Bi,
            bi = w2r * Bi + w2i * Br;
          const cr = w1r * Cr - w1i * Ci,
            ci = w1r * Ci + w1i * Cr;
          const dr = w3r * Dr - w3i * Di,
            di = w3r * Di + w3i * Dr;
          const Ar = re[a]!,
            Ai = im[a]!;
          const t0r = Ar + br,
            t0i = Ai + bi,
            t1r = Ar - br,
            t1i = Ai - bi,
            t2r = cr + dr,
            t2i = ci + di,
            t3r = cr - dr,
            t3i = ci - di;
          re[a] = t0r + t2r;
          im[a] = t0i + t2i;
          re[c] = t0r - t2r;
          im[c] = t0i - t2i;
          // −i·(x + iy) = y − ix
          re[b] = t1r + t3i;
          im[b] = t1i - t3r;
          re[d] = t1r - t3i;
          im[d] = t1i + t3r;
        }
      }
      tw += 6 * s;
    }
  }
}
