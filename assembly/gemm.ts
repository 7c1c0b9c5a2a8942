// Single-precision GEMM: C[M×N] = alpha·op(A)·op(B) + beta·C, row-major, all transpose variants.
//
// Goto/BLIS structure: for each NC-wide column block of B and KC-deep slice of K, pack B into
// KC×NR micro-panels (NR = 8 columns, contiguous per k); for each MC-tall row block of A, pack A
// (scaled by alpha) into KC×MR micro-panels (MR = 4 rows, contiguous per k); then the 4×8
// register-tiled micro-kernel (8 v128 accumulators) runs over all MR×NR tiles, the B micro-panel
// staying in L1 while A micro-panels stream from L2. Edge tiles are zero-padded in the packs and
// computed into a small tile buffer, then added to C. 4×8 measured fastest on Zen1 under V8
// (larger tiles spill: V8 keeps one xmm register as scratch).

import { madd, at } from './simd';

export const MR: i32 = 4;
export const NR: i32 = 8;
/** Maximum block sizes; the scratch layout is sized for them. */
export const MC_MAX: i32 = 256;
export const KC_MAX: i32 = 512;
export const NC_MAX: i32 = 2048;

let mcBlock: i32 = 128;
let kcBlock: i32 = 384;
let ncBlock: i32 = 1024;

let packA: usize = 0;
let packB: usize = 0;
let tileBuf: usize = 0;

/** Bytes of scratch the gemm needs (packed A, packed B, one edge tile). */
export function gemmScratchBytes(): i32 {
  return MC_MAX * KC_MAX * 4 + KC_MAX * NC_MAX * 4 + MR * NR * 4 + 64;
}

export function setGemmScratch(ptr: usize): void {
  packA = (ptr + 15) & ~<usize>15;
  packB = packA + <usize>(MC_MAX * KC_MAX * 4);
  tileBuf = packB + <usize>(KC_MAX * NC_MAX * 4);
}

/** Tuning hook: block sizes (clamped to the maxima; MC multiple of MR, NC multiple of NR). */
export function setBlocking(mc: i32, kc: i32, nc: i32): void {
  mcBlock = max(MR, min(MC_MAX, mc / MR * MR));
  kcBlock = max(1, min(KC_MAX, kc));
  ncBlock = max(NR, min(NC_MAX, nc / NR * NR));
}

// ---------------------------------------------------------------------------------------------
// micro-kernel: C[4×8] (+)= Σ_k pa[k*4 + r] · pb[k*8 + c]

// @ts-ignore: decorator
@inline function kernel4x8(kc: i32, pa: usize, pb: usize, c: usize, ldc: i32): void {
  let c00 = f32x4.splat(0), c01 = f32x4.splat(0);
  let c10 = f32x4.splat(0), c11 = f32x4.splat(0);
  let c20 = f32x4.splat(0), c21 = f32x4.splat(0);
  let c30 = f32x4.splat(0), c31 = f32x4.splat(0);
  for (let k = 0; k < kc; k++) {
    const b0 = v128.load(pb), b1 = v128.load(pb, 16);
    let a = v128.load32_splat(pa);
    c00 = madd(a, b0, c00); c01 = madd(a, b1, c01);
    a = v128.load32_splat(pa, 4);
    c10 = madd(a, b0, c10); c11 = madd(a, b1, c11);
    a = v128.load32_splat(pa, 8);
    c20 = madd(a, b0, c20); c21 = madd(a, b1, c21);
    a = v128.load32_splat(pa, 12);
    c30 = madd(a, b0, c30); c31 = madd(a, b1, c31);
    pa += 16; pb += 32;
  }
  const ld = <usize>ldc << 2;
  v128.store(c, f32x4.add(v128.load(c), c00)); v128.store(c, f32x4.add(v128.load(c, 16), c01), 16); c += ld;
  v128.store(c, f32x4.add(v128.load(c), c10)); v128.store(c, f32x4.add(v128.load(c, 16), c11), 16); c += ld;
  v128.store(c, f32x4.add(v128.load(c), c20)); v128.store(c, f32x4.add(v128.load(c, 16), c21), 16); c += ld;
  v128.store(c, f32x4.add(v128.load(c), c30)); v128.store(c, f32x4.add(v128.load(c, 16), c31), 16);
}

function microFull(kc: i32, pa: usize, pb: usize, c: usize, ldc: i32): void {
  kernel4x8(kc, pa, pb, c, ldc);
}

function microEdge(kc: i32, pa: usize, pb: usize, c: usize, ldc: i32, mr: i32, nr: i32): void {
  const t = tileBuf;
  const z = f32x4.splat(0);
  for (let i = 0; i < MR * NR; i += 4) v128.store(at(t, i), z);
  kernel4x8(kc, pa, pb, t, NR);
  for (let r = 0; r < mr; r++) {
    const crow = c + (<usize>(r * ldc) << 2);
    const trow = at(t, r * NR);
    for (let j = 0; j < nr; j++) store<f32>(at(crow, j), load<f32>(at(crow, j)) + load<f32>(at(trow, j)));
  }
}

// ---------------------------------------------------------------------------------------------
// packing

/** Pack rows [i0, i0+mc) × depth [k0, k0+kc) of op(A), times alpha, into MR-row micro-panels. */
function packABlock(transA: bool, A: usize, lda: i32, M: i32, i0: i32, mc: i32, k0: i32, kc: i32, alpha: f32, dst: usize): void {
  const va = f32x4.splat(alpha);
  for (let p = 0; p < mc; p += MR) {
    const i = i0 + p;
    const rows = min(MR, M - i);
    let d = dst + (<usize>(p * kc) << 2);
    if (rows == MR) {
      if (transA) {
        // A stored K×M: A(i,k) = A[k*lda + i]; the 4 rows for one k are contiguous.
        let s = at(A, k0 * lda + i);
        const step = <usize>lda << 2;
        for (let k = 0; k < kc; k++) {
          v128.store(d, f32x4.mul(v128.load(s), va));
          s += step; d += 16;
        }
      } else {
        // A(i,k) = A[i*lda + k]: read 4 rows × 4 k, transpose 4×4.
        const r0 = at(A, i * lda + k0), r1 = r0 + (<usize>lda << 2), r2 = r1 + (<usize>lda << 2), r3 = r2 + (<usize>lda << 2);
        let k = 0;
        for (; k + 4 <= kc; k += 4) {
          const o = <usize>k << 2;
          const x0 = v128.load(r0 + o), x1 = v128.load(r1 + o), x2 = v128.load(r2 + o), x3 = v128.load(r3 + o);
          const t0 = v128.shuffle<f32>(x0, x1, 0, 4, 1, 5), t1 = v128.shuffle<f32>(x0, x1, 2, 6, 3, 7);
          const t2 = v128.shuffle<f32>(x2, x3, 0, 4, 1, 5), t3 = v128.shuffle<f32>(x2, x3, 2, 6, 3, 7);
          v128.store(d, f32x4.mul(v128.shuffle<f32>(t0, t2, 0, 1, 4, 5), va));
          v128.store(d, f32x4.mul(v128.shuffle<f32>(t0, t2, 2, 3, 6, 7), va), 16);
          v128.store(d, f32x4.mul(v128.shuffle<f32>(t1, t3, 0, 1, 4, 5), va), 32);
          v128.store(d, f32x4.mul(v128.shuffle<f32>(t1, t3, 2, 3, 6, 7), va), 48);
          d += 64;
        }
        for (; k < kc; k++) {
          const o = <usize>k << 2;
          store<f32>(d, load<f32>(r0 + o) * alpha);
          store<f32>(d, load<f32>(r1 + o) * alpha, 4);
          store<f32>(d, load<f32>(r2 + o) * alpha, 8);
          store<f32>(d, load<f32>(r3 + o) * alpha, 12);
          d += 16;
        }
      }
    } else {
      for (let k = 0; k < kc; k++) {
        for (let r = 0; r < MR; r++) {
          let v: f32 = 0;
          if (r < rows) v = transA ? load<f32>(at(A, (k0 + k) * lda + i + r)) : load<f32>(at(A, (i + r) * lda + k0 + k));
          store<f32>(d, v * alpha);
          d += 4;
        }
      }
    }
  }
}

/** Pack depth [k0, k0+kc) × columns [j0, j0+nc) of op(B) into NR-column micro-panels. */
function packBBlock(transB: bool, B: usize, ldb: i32, N: i32, k0: i32, kc: i32, j0: i32, nc: i32, dst: usize): void {
  for (let q = 0; q < nc; q += NR) {
    const j = j0 + q;
    const cols = min(NR, N - j);
    let d = dst + (<usize>(q * kc) << 2);
    if (cols == NR) {
      if (!transB) {
        // B(k,j) = B[k*ldb + j]: 8 contiguous floats per k.
        let s = at(B, k0 * ldb + j);
        const step = <usize>ldb << 2;
        for (let k = 0; k < kc; k++) {
          v128.store(d, v128.load(s));
          v128.store(d, v128.load(s, 16), 16);
          s += step; d += 32;
        }
      } else {
        // B stored N×K: B(k,j) = B[j*ldb + k]: 8 rows contiguous in k; transpose 4×4 blocks.
        const ld = <usize>ldb << 2;
        const r0 = at(B, j * ldb + k0), r1 = r0 + ld, r2 = r1 + ld, r3 = r2 + ld;
        const r4 = r3 + ld, r5 = r4 + ld, r6 = r5 + ld, r7 = r6 + ld;
        let k = 0;
        for (; k + 4 <= kc; k += 4) {
          const o = <usize>k << 2;
          let x0 = v128.load(r0 + o), x1 = v128.load(r1 + o), x2 = v128.load(r2 + o), x3 = v128.load(r3 + o);
          let t0 = v128.shuffle<f32>(x0, x1, 0, 4, 1, 5), t1 = v128.shuffle<f32>(x0, x1, 2, 6, 3, 7);
          let t2 = v128.shuffle<f32>(x2, x3, 0, 4, 1, 5), t3 = v128.shuffle<f32>(x2, x3, 2, 6, 3, 7);
          v128.store(d, v128.shuffle<f32>(t0, t2, 0, 1, 4, 5));
          v128.store(d, v128.shuffle<f32>(t0, t2, 2, 3, 6, 7), 32);
          v128.store(d, v128.shuffle<f32>(t1, t3, 0, 1, 4, 5), 64);
          v128.store(d, v128.shuffle<f32>(t1, t3, 2, 3, 6, 7), 96);
          x0 = v128.load(r4 + o); x1 = v128.load(r5 + o); x2 = v128.load(r6 + o); x3 = v128.load(r7 + o);
          t0 = v128.shuffle<f32>(x0, x1, 0, 4, 1, 5); t1 = v128.shuffle<f32>(x0, x1, 2, 6, 3, 7);
          t2 = v128.shuffle<f32>(x2, x3, 0, 4, 1, 5); t3 = v128.shuffle<f32>(x2, x3, 2, 6, 3, 7);
          v128.store(d, v128.shuffle<f32>(t0, t2, 0, 1, 4, 5), 16);
          v128.store(d, v128.shuffle<f32>(t0, t2, 2, 3, 6, 7), 48);
          v128.store(d, v128.shuffle<f32>(t1, t3, 0, 1, 4, 5), 80);
          v128.store(d, v128.shuffle<f32>(t1, t3, 2, 3, 6, 7), 112);
          d += 128;
        }
        for (; k < kc; k++) {
          const o = <usize>k << 2;
          store<f32>(d, load<f32>(r0 + o)); store<f32>(d, load<f32>(r1 + o), 4);
          store<f32>(d, load<f32>(r2 + o), 8); store<f32>(d, load<f32>(r3 + o), 12);
          store<f32>(d, load<f32>(r4 + o), 16); store<f32>(d, load<f32>(r5 + o), 20);
          store<f32>(d, load<f32>(r6 + o), 24); store<f32>(d, load<f32>(r7 + o), 28);
          d += 32;
        }
      }
    } else {
      for (let k = 0; k < kc; k++) {
        for (let c = 0; c < NR; c++) {
          let v: f32 = 0;
          if (c < cols) v = transB ? load<f32>(at(B, (j + c) * ldb + k0 + k)) : load<f32>(at(B, (k0 + k) * ldb + j + c));
          store<f32>(d, v);
          d += 4;
        }
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------

/** C ← beta·C over an M×N block with leading dimension ldc. */
export function scaleC(M: i32, N: i32, beta: f32, C: usize, ldc: i32): void {
  if (beta == 1) return;
  const vb = f32x4.splat(beta);
  const z = f32x4.splat(0);
  for (let i = 0; i < M; i++) {
    const row = at(C, i * ldc);
    let j = 0;
    if (beta == 0) {
      for (; j + 4 <= N; j += 4) v128.store(at(row, j), z);
      for (; j < N; j++) store<f32>(at(row, j), 0);
    } else {
      for (; j + 4 <= N; j += 4) v128.store(at(row, j), f32x4.mul(v128.load(at(row, j)), vb));
      for (; j < N; j++) store<f32>(at(row, j), load<f32>(at(row, j)) * beta);
    }
  }
}

/** The macro-kernel: C[0:M, j0:j0+nc] += op(A)[:, k0:k0+kc] · (one packed kc×nc block of B at pb0). */
function macroBlock(transA: bool, A: usize, lda: i32, M: i32, alpha: f32, k0: i32, kc: i32,
                    j0: i32, nc: i32, pb0: usize, C: usize, ldc: i32): void {
  for (let i0 = 0; i0 < M; i0 += mcBlock) {
    const mc = min(mcBlock, M - i0);
    packABlock(transA, A, lda, M, i0, mc, k0, kc, alpha, packA);
    for (let jr = 0; jr < nc; jr += NR) {
      const nr = min(NR, nc - jr);
      const pb = pb0 + (<usize>(jr * kc) << 2);
      const cc = at(C, i0 * ldc + j0 + jr);
      for (let ir = 0; ir < mc; ir += MR) {
        const mr = min(MR, mc - ir);
        const pa = packA + (<usize>(ir * kc) << 2);
        const c = cc + (<usize>(ir * ldc) << 2);
        if (mr == MR && nr == NR) microFull(kc, pa, pb, c, ldc);
        else microEdge(kc, pa, pb, c, ldc, mr, nr);
      }
    }
  }
}

/** Depth of the K slices for depth K: balanced so the last one is not tiny. */
export function kSlice(K: i32): i32 {
  if (K <= 0) return 1;
  const nk = (K + kcBlock - 1) / kcBlock;
  return max(1, (K + nk - 1) / nk);
}

/** General strided gemm (byte pointers, element leading dimensions). */
export function gemmStrided(transA: bool, transB: bool, M: i32, N: i32, K: i32, alpha: f32,
                            A: usize, lda: i32, B: usize, ldb: i32, beta: f32, C: usize, ldc: i32): void {
  if (M <= 0 || N <= 0) return;
  scaleC(M, N, beta, C, ldc);
  if (K <= 0 || alpha == 0) return;
  const kcb = kSlice(K);
  for (let j0 = 0; j0 < N; j0 += ncBlock) {
    const nc = min(ncBlock, N - j0);
    for (let k0 = 0; k0 < K; k0 += kcb) {
      const kc = min(kcb, K - k0);
      packBBlock(transB, B, ldb, N, k0, kc, j0, nc, packB);
      macroBlock(transA, A, lda, M, alpha, k0, kc, j0, nc, packB, C, ldc);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// pre-packed B: a recurrent weight is the B of every step's gemm, so it is packed once per pass.
// Layout: the block of columns [j0, j0+nc) and depth [k0, k0+kc) starts at float j0·K + k0·ncp
// (ncp = nc rounded up to NR) and holds packBBlock's micro-panels; K·roundup(N, NR) floats in all.

/** Column-block width the packs use now (record it with the pack). */
export function packedNc(): i32 {
  return ncBlock;
}

/** Packs all of op(B) [K×N] into dst with K slices of kcb and column blocks of ncb (ncb a multiple of NR). */
export function packBFull(transB: bool, B: usize, ldb: i32, K: i32, N: i32, kcb: i32, ncb: i32, dst: usize): void {
  for (let j0 = 0; j0 < N; j0 += ncb) {
    const nc = min(ncb, N - j0), ncp = (nc + NR - 1) / NR * NR;
    for (let k0 = 0; k0 < K; k0 += kcb) {
      packBBlock(transB, B, ldb, N, k0, min(kcb, K - k0), j0, nc, dst + (<usize>(j0 * K + k0 * ncp) << 2));
    }
  }
}

/** C = alpha·op(A)·P + beta·C, P packed by packBFull with the same K, N, kcb, ncb. */
export function gemmPacked(transA: bool, M: i32, N: i32, K: i32, alpha: f32, A: usize, lda: i32,
                           P: usize, kcb: i32, ncb: i32, beta: f32, C: usize, ldc: i32): void {
  if (M <= 0 || N <= 0) return;
  scaleC(M, N, beta, C, ldc);
  if (K <= 0 || alpha == 0) return;
  for (let j0 = 0; j0 < N; j0 += ncb) {
    const nc = min(ncb, N - j0), ncp = (nc + NR - 1) / NR * NR;
    for (let k0 = 0; k0 < K; k0 += kcb) {
      const pb = P + (<usize>(j0 * K + k0 * ncp) << 2);
      macroBlock(transA, A, lda, M, alpha, k0, min(kcb, K - k0), j0, nc, pb, C, ldc);
    }
  }
}

/** The Backend.gemm entry: dense row-major operands. */
export function gemm(transA: bool, transB: bool, M: i32, N: i32, K: i32, alpha: f32,
                     A: usize, B: usize, beta: f32, C: usize): void {
  gemmStrided(transA, transB, M, N, K, alpha, A, transA ? M : K, B, transB ? K : N, beta, C, N);
}
