/**
 * Cache-blocked single-precision GEMM in plain TypeScript (GotoBLAS structure):
 * C[M×N] = alpha·op(A)·op(B) + beta·C, all row-major and contiguous.
 *
 * The K×N block of op(B) is packed into 4-column panels and the M×K block of op(A) into 4-row
 * panels, so a 4×4 micro-kernel streams both with stride 1 whatever the transposes were, and
 * keeps its 16 accumulators in locals (float64, so long sums lose little).
 */

/** Micro-tile is 4×4; these block sizes keep a packed B block (KC·NC floats = 256 KB) in L2. */
const KC = 256;
const MC = 64;
const NC = 256;

// Packing scratch: each worker thread has its own module instance and gemm is synchronous, so
// reusing them across calls is safe.
const packA = new Float32Array(MC * KC);
const packB = new Float32Array(KC * NC);
// Edge tiles go through this so the micro-kernel has one write-back path for partial tiles.
const edgeTile = new Float64Array(16);

/** C[M×N] = alpha·op(A)·op(B) + beta·C; op(A) is M×K (stored K×M when transA), op(B) is K×N (stored N×K when transB). */
export function gemm(
  transA: boolean,
  transB: boolean,
  M: number,
  N: number,
  K: number,
  alpha: number,
  A: Float32Array,
  B: Float32Array,
  beta: number,
  C: Float32Array,
): void {
  const MN = M * N;
  if (MN === 0) return;
  // beta = 0 must overwrite (NaN · 0 would stay NaN), so it is not a multiplication.
  if (beta === 0) C.fill(0, 0, MN);
  else if (beta !== 1) for (let i = 0; i < MN; i++) C[i] *= beta;
  if (K === 0 || alpha === 0) return;

  const pa = packA,
    pb = packB;

  for (let jc = 0; jc < N; jc += NC) {
    const nc = Math.min(NC, N - jc);
    for (let pc = 0; pc < K; pc += KC) {
      const kc = Math.min(KC, K - pc);
      if (transB) packBT(B, K, pc, kc, jc, nc, pb);
      else packBN(B, N, pc, kc, jc, nc, pb);
      for (let ic = 0; ic < M; ic += MC) {
        const mc = Math.min(MC, M - ic);
        if (transA) packAT(A, M, ic, mc, pc, kc, pa);
        else packAN(A, K, ic, mc, pc, kc, pa);
        macroKernel(mc, nc, kc, alpha, pa, pb, C, ic, jc, N);
      }
    }
  }
}

/** op(B) = B (K×N): panel q holds columns jc+4q…jc+4q+3, element (k, jj) at q·4kc + 4k + jj; missing columns are 0. */
function packBN(B: Float32Array, N: number, pc: number, kc: number, jc: number, nc: number, pb: Float32Array): void {
  const full = nc >> 2;
  const kc4 = kc * 4;
  for (let q = 0; q < full; q++) {
    let dst = q * kc4;
    let src = pc * N + jc + q * 4;
    for (let k = 0; k < kc; k++) {
      pb[dst] = B[src];
      pb[dst + 1] = B[src + 1];
      pb[dst + 2] = B[src + 2];
      pb[dst + 3] = B[src + 3];
      dst += 4;
      src += N;
    }
  }
  const rem = nc - full * 4;
  if (rem > 0) {
    let dst = full * kc4;
    let src = pc * N + jc + full * 4;
    for (let k = 0; k < kc; k++) {
      for (let jj = 0; jj < 4; jj++) pb[dst + jj] = jj < rem ? B[src + jj] : 0;
      dst += 4;
      src += N;
    }
  }
}

/** op(B) = Bᵀ with B stored N×K: each packed column is a contiguous run of a row of B. */
function packBT(B: Float32Array, K: number, pc: number, kc: number, jc: number, nc: number, pb: Float32Array): void {
  const panels = (nc + 3) >> 2;
  const kc4 = kc * 4;
  for (let q = 0; q < panels; q++) {
    const base = q * kc4;
    for (let jj = 0; jj < 4; jj++) {
      const j = q * 4 + jj;
      let dst = base + jj;
      if (j < nc) {
        let src = (jc + j) * K + pc;
        for (let k = 0; k < kc; k++) {
          pb[dst] = B[src++];
          dst += 4;
        }
      } else {
        for (let k = 0; k < kc; k++) {
          pb[dst] = 0;
          dst += 4;
        }
      }
    }
  }
}

/** op(A) = A (M×K): panel p holds rows ic+4p…ic+4p+3, element (k, ii) at p·4kc + 4k + ii; missing rows are 0. */
function packAN(A: Float32Array, K: number, ic: number, mc: number, pc: number, kc: number, pa: Float32Array): void {
  const panels = (mc + 3) >> 2;
  const kc4 = kc * 4;
  for (let p = 0; p < panels; p++) {
    const base = p * kc4;
    for (let ii = 0; ii < 4; ii++) {
      const i = p * 4 + ii;
      let dst = base + ii;
      if (i < mc) {
        let src = (ic + i) * K + pc;
        for (let k = 0; k < kc; k++) {
          pa[dst] = A[src++];
          dst += 4;
        }
      } else {
        for (let k = 0; k < kc; k++) {
          pa[dst] = 0;
          dst += 4;
        }
      }
    }
  }
}

/** op(A) = Aᵀ with A stored K×M: four consecutive rows of op(A) are four contiguous values of A. */
function packAT(A: Float32Array, M: number, ic: number, mc: number, pc: number, kc: number, pa: Float32Array): void {
  const full = mc >> 2;
  const kc4 = kc * 4;
  for (let p = 0; p < full; p++) {
    let dst = p * kc4;
    let src = pc * M + ic + p * 4;
    for (let k = 0; k < kc; k++) {
      pa[dst] = A[src];
      pa[dst + 1] = A[src + 1];
      pa[dst + 2] = A[src + 2];
      pa[dst + 3] = A[src + 3];
      dst += 4;
      src += M;
    }
  }
  const rem = mc - full * 4;
  if (rem > 0) {
    let dst = full * kc4;
    let src = pc * M + ic + full * 4;
    for (let k = 0; k < kc; k++) {
      for (let ii = 0; ii < 4; ii++) pa[dst + ii] = ii < rem ? A[src + ii] : 0;
      dst += 4;
      src += M;
    }
  }
}

/** C[ic…ic+mc, jc…jc+nc] += alpha · (packed A block)·(packed B block), one 4×4 tile at a time. */
function macroKernel(
  mc: number,
  nc: number,
  kc: number,
  alpha: number,
  pa: Float32Array,
  pb: Float32Array,
  C: Float32Array,
  ic: number,
  jc: number,
  ldc: number,
): void {
  const mPanels = (mc + 3) >> 2;
  const nPanels = (nc + 3) >> 2;
  const kc4 = kc * 4;
  for (let p = 0; p < mPanels; p++) {
    const aBase = p * kc4;
    const i0 = ic + p * 4;
    const mr = Math.min(4, mc - p * 4);
    for (let q = 0; q < nPanels; q++) {
      let a = aBase;
      let b = q * kc4;
      let c00 = 0,
        c01 = 0,
        c02 = 0,
        c03 = 0;
      let c10 = 0,
        c11 = 0,
        c12 = 0,
        c13 = 0;
      let c20 = 0,
        c21 = 0,
        c22 = 0,
        c23 = 0;
      let c30 = 0,
        c31 = 0,
        c32 = 0,
        c33 = 0;
      for (let k = 0; k < kc; k++) {
        const b0 = pb[b],
          b1 = pb[b + 1],
          b2 = pb[b + 2],
          b3 = pb[b + 3];
        const a0 = pa[a];
        c00 += a0 * b0;
        c01 += a0 * b1;
        c02 += a0 * b2;
        c03 += a0 * b3;
        const a1 = pa[a + 1];
        c10 += a1 * b0;
        c11 += a1 * b1;
        c12 += a1 * b2;
        c13 += a1 * b3;
        const a2 = pa[a + 2];
        c20 += a2 * b0;
        c21 += a2 * b1;
        c22 += a2 * b2;
        c23 += a2 * b3;
        const a3 = pa[a + 3];
        c30 += a3 * b0;
        c31 += a3 * b1;
        c32 += a3 * b2;
        c33 += a3 * b3;
        a += 4;
        b += 4;
      }
      const j0 = jc + q * 4;
      const nr = Math.min(4, nc - q * 4);
      if (mr === 4 && nr === 4) {
        let o = i0 * ldc + j0;
        C[o] += alpha * c00;
        C[o + 1] += alpha * c01;
        C[o + 2] += alpha * c02;
        C[o + 3] += alpha * c03;
        o += ldc;
        C[o] += alpha * c10;
        C[o + 1] += alpha * c11;
        C[o + 2] += alpha * c12;
        C[o + 3] += alpha * c13;
        o += ldc;
        C[o] += alpha * c20;
        C[o + 1] += alpha * c21;
        C[o + 2] += alpha * c22;
        C[o + 3] += alpha * c23;
        o += ldc;
        C[o] += alpha * c30;
        C[o + 1] += alpha * c31;
        C[o + 2] += alpha * c32;
        C[o + 3] += alpha * c33;
      } else {
        const t = edgeTile;
        t[0] = c00;
        t[1] = c01;
        t[2] = c02;
        t[3] = c03;
        t[4] = c10;
        t[5] = c11;
        t[6] = c12;
        t[7] = c13;
        t[8] = c20;
        t[9] = c21;
        t[10] = c22;
        t[11] = c23;
        t[12] = c30;
        t[13] = c31;
        t[14] = c32;
        t[15] = c33;
        for (let ii = 0; ii < mr; ii++) {
          const o = (i0 + ii) * ldc + j0;
          for (let jj = 0; jj < nr; jj++) C[o + jj] += alpha * t[ii * 4 + jj];
        }
      }
    }
  }
}
