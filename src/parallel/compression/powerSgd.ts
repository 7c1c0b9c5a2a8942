/**
 * PowerSGD (Vogels et al., NeurIPS 2019), as PyTorch's `powerSGD_hook` runs it. For each weight
 * matrix M (n × m: shape[0] × the rest, this device's gradient) of approximation rank
 * r = min(rank, n, m), with error feedback e and Q (m × r) the same on every device:
 *
 *   M ← M + e;  P ← M Q;  all-reduce P (mean);  orthonormalise P's columns (Gram–Schmidt);
 *   Q ← Mᵀ P;  all-reduce Q (mean);  approx ← P Qᵀ;  e ← M − approx;  the gradient applied is approx
 *
 * Vectors, and matrices that compression would not shrink by `minCompressionRate` ((n + m)·r ·
 * rate ≥ n·m, PyTorch's test), are all-reduced uncompressed in the same call as the P's. Q is
 * drawn from the run's seed (standard normal, the same on every device): once, then reused from
 * step to step with warmStart (the previous step's all-reduced Q), else drawn afresh each step.
 * Products and the orthonormalisation run in float64; what travels and what is kept is float32.
 */
import type { Communicator } from '../../comm/communicator.ts';
import { CounterRng } from '../../tensor/rng.ts';
import { gaps, type TensorPlace } from './tensors.ts';
import { sharedFloats } from './oneBit.ts';

export interface PowerSgdOptions {
  rank: number;
  warmStart: boolean;
  minCompressionRate: number;
  seed: number;
}

interface Factor {
  offset: number;
  n: number;
  m: number;
  r: number;
  /** where its P lies in the first all-reduce's buffer, its Q in `q` */
  p: number;
  q: number;
}

export class PowerSgd {
  /** e: what the low-rank approximations left out, per entry of the compressed matrices (0 elsewhere) */
  readonly error: Float32Array;
  /** every compressed matrix's Q, one after another */
  readonly q: Float32Array;
  readonly factors: readonly Factor[];
  /** the ranges all-reduced as they are */
  private readonly plain: { start: number; end: number }[];
  private readonly first: Float32Array;
  private readonly plainLength: number;

  constructor(
    private readonly comm: Communicator,
    readonly length: number,
    places: readonly TensorPlace[],
    private readonly o: PowerSgdOptions,
  ) {
    const factors: Factor[] = [];
    const plain: { start: number; end: number }[] = gaps(length, places);
    let p = 0,
      q = 0;
    for (const t of places) {
      const r = Math.min(o.rank, t.rows, t.cols);
      if (!t.matrix || (t.rows + t.cols) * r * o.minCompressionRate >= t.rows * t.cols) {
        plain.push({ start: t.offset, end: t.offset + t.size });
        continue;
      }
      factors.push({ offset: t.offset, n: t.rows, m: t.cols, r, p, q });
      p += t.rows * r;
      q += t.cols * r;
    }
    this.factors = factors;
    this.plain = plain.sort((a, b) => a.start - b.start);
    this.plainLength = plain.reduce((s, g) => s + g.end - g.start, 0);
    this.first = sharedFloats(this.plainLength + p);
    this.q = sharedFloats(q);
    this.error = new Float32Array(length);
    this.drawQ(0);
  }

  /** The buffers collectives run on, to register with the transport (in this order on every device). */
  get collectiveBuffers(): Float32Array[] {
    return [this.first, this.q];
  }

  /** Q from the seed: at the start (step 0 stands for it with warmStart) or afresh for `step`. */
  private drawQ(step: number): void {
    for (const [k, f] of this.factors.entries()) {
      const rng = new CounterRng(this.o.seed, 0x9057, k, this.o.warmStart ? 0 : step);
      for (let i = 0; i < f.m * f.r; i++) this.q[f.q + i] = rng.normal();
    }
  }

  /** `grads` (this device's gradient) becomes the rank-r estimate of the mean over the devices, at global step `step`. */
  async reduce(grads: Float32Array, step: number): Promise<void> {
    const { factors, first, error: e } = this;
    if (!this.o.warmStart) this.drawQ(step);
    let at = 0;
    for (const g of this.plain) {
      first.set(grads.subarray(g.start, g.end), at);
      at += g.end - g.start;
    }
    const P = first.subarray(this.plainLength);
    for (const f of factors) {
      const M = grads.subarray(f.offset, f.offset + f.n * f.m);
      for (let i = 0; i < M.length; i++) M[i] = M[i]! + e[f.offset + i]!;
      multiply(M, f.n, f.m, this.q.subarray(f.q), f.r, P.subarray(f.p));
    }
    await this.comm.allreduce(first, 'mean');
    at = 0;
    for (const g of this.plain) {
      grads.set(first.subarray(at, at + g.end - g.start), g.start);
      at += g.end - g.start;
    }
    for (const f of factors) {
      orthonormalise(P.subarray(f.p, f.p + f.n * f.r), f.n, f.r);
      const M = grads.subarray(f.offset, f.offset + f.n * f.m);
      multiplyTransposed(M, f.n, f.m, P.subarray(f.p), f.r, this.q.subarray(f.q));
    }
    await this.comm.allreduce(this.q, 'mean');
    for (const f of factors) approximate(grads, e, f, P.subarray(f.p), this.q.subarray(f.q));
  }

  /** Back to the state of a fresh run (no error, the first Q). */
  reset(): void {
    this.error.fill(0);
    this.drawQ(0);
  }
}

/** out (n × r) ← M (n × m) · Q (m × r), row-major. */
function multiply(M: Float32Array, n: number, m: number, Q: Float32Array, r: number, out: Float32Array): void {
  const row = new Float64Array(r);
  for (let i = 0; i < n; i++) {
    row.fill(0);
    for (let j = 0; j < m; j++) {
      const v = M[i * m + j]!;
      if (v === 0) continue;
      for (let k = 0; k < r; k++) row[k]! += v * Q[j * r + k]!;
    }
    for (let k = 0; k < r; k++) out[i * r + k] = row[k]!;
  }
}

/** out (m × r) ← Mᵀ (m × n) · P (n × r). */
function multiplyTransposed(
  M: Float32Array,
  n: number,
  m: number,
  P: Float32Array,
  r: number,
  out: Float32Array,
): void {
  const acc = new Float64Array(m * r);
  for (let i = 0; i < n; i++) {
    for (let j = 0; j < m; j++) {
      const v = M[i * m + j]!;
      if (v === 0) continue;
      for (let k = 0; k < r; k++) acc[j * r + k]! += v * P[i * r + k]!;
    }
  }
  for (let i = 0; i < m * r; i++) out[i] = acc[i]!;
}

/**
 * Modified Gram–Schmidt on the r columns of P (n × r): each column made orthogonal to those before
 * it, then of unit length; a column with nothing left (norm 0) stays 0, so it adds nothing to P Qᵀ.
 */
export function orthonormalise(P: Float32Array, n: number, r: number): void {
  const cols = Array.from({ length: r }, (_, k) => Float64Array.from({ length: n }, (_, i) => P[i * r + k]!));
  for (let k = 0; k < r; k++) {
    const c = cols[k]!;
    for (let l = 0; l < k; l++) {
      const b = cols[l]!;
      let dot = 0;
      for (let i = 0; i < n; i++) dot += b[i]! * c[i]!;
      for (let i = 0; i < n; i++) c[i]! -= dot * b[i]!;
    }
    let norm = 0;
    for (let i = 0; i < n; i++) norm += c[i]! * c[i]!;
    norm = Math.sqrt(norm);
    for (let i = 0; i < n; i++) c[i] = norm > 0 ? c[i]! / norm : 0;
    for (let i = 0; i < n; i++) P[i * r + k] = c[i]!;
  }
}

/** approx ← P Qᵀ into the matrix's place in `grads`, and e ← M − approx (M is what `grads` holds there now). */
function approximate(grads: Float32Array, e: Float32Array, f: Factor, P: Float32Array, Q: Float32Array): void {
  const { n, m, r, offset } = f;
  for (let i = 0; i < n; i++) {
    for (let j = 0; j < m; j++) {
      let a = 0;
      for (let k = 0; k < r; k++) a += P[i * r + k]! * Q[j * r + k]!;
      const at = offset + i * m + j;
      const approx = Math.fround(a);
      e[at] = grads[at]! - approx;
      grads[at] = approx;
    }
  }
}
