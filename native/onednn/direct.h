/*
 * What direct.c and convpool.c share: the AVX-512 guard and the helpers of their convolution
 * kernels for few input channels (see direct.c). Static inline: each file gets its own copy.
 */
#ifndef PARATRAIN_ONEDNN_DIRECT_H
#define PARATRAIN_ONEDNN_DIRECT_H

#include <stdlib.h>
#include <string.h>
#include "onednn.h"

/* The AVX-512 kernels exist on x86-64 only; elsewhere smallConv() is false and oneDNN runs every convolution. */
#if defined(__x86_64__) && defined(__GNUC__)
#define X86 1
#include <immintrin.h>
#define AVX512 __attribute__((target("avx512f")))
#endif

/* The largest window (KH·KW·C) taken here. */
#define MAX_SMALL_K 36
/* Output pixels computed together: independent accumulator chains (FMA latency × throughput). */
#define PIX 4

#ifdef X86
/*
 * True when the CPU has AVX-512 and oneDNN may use it: the addon's AVX-512 paths follow oneDNN's
 * own dispatch, so ONEDNN_MAX_CPU_ISA=AVX2 runs the whole backend as on an AVX2 machine.
 */
static inline bool hasAvx512(void) {
  static int avx512 = -1;
  if (avx512 < 0) {
    const unsigned isa = (unsigned)dnnl_get_effective_cpu_isa(), core = (unsigned)dnnl_cpu_isa_avx512_core;
    avx512 = __builtin_cpu_supports("avx512f") && (isa & core) == core ? 1 : 0;
  }
  return avx512;
}

/* The lanes of a block of up to 16 filters starting at f. */
static inline __mmask16 lanes(int64_t F, int64_t f) {
  const int64_t n = F - f;
  return n >= 16 ? (__mmask16)0xffff : n <= 0 ? 0 : (__mmask16)((1u << n) - 1);
}

/* Offsets in x of a window's cells (kh, kw, c) from its first cell, in the order of w's rows. */
static inline void windowOffsets(const Geom *g, int64_t *off) {
  for (int64_t kh = 0, k = 0; kh < g->KH; kh++)
    for (int64_t kw = 0; kw < g->KW; kw++)
      for (int64_t c = 0; c < g->C; c++) off[k++] = (kh * g->W + kw) * g->C + c;
}

/* True when the window of output (oh, ow) lies wholly inside the image. */
static inline bool inside(const Geom *g, int64_t oh, int64_t ow) {
  const int64_t ih = oh * g->sh - g->pt, iw = ow * g->sw - g->pl;
  return ih >= 0 && ih + g->KH <= g->H && iw >= 0 && iw + g->KW <= g->W;
}

/* x[n, window cell k of output (oh, ow)], 0 in the padding. */
static inline float cell(const Geom *g, const float *x, int64_t n, int64_t oh, int64_t ow, int64_t k) {
  const int64_t KWC = g->KW * g->C;
  const int64_t ih = oh * g->sh - g->pt + k / KWC, iw = ow * g->sw - g->pl + k % KWC / g->C;
  if (ih < 0 || ih >= g->H || iw < 0 || iw >= g->W) return 0.0f;
  return x[((n * g->H + ih) * g->W + iw) * g->C + k % g->C];
}

/*
 * PIX output pixels whose windows lie inside the image, their first input cells at xb[p]: a0/a1[p]
 * = b + Σ_k xb[p][off[k]]·w[k, f0 … f0 + 31]. Always inlined with PIX constant, so the accumulators
 * stay in registers.
 */
__attribute__((always_inline)) AVX512 static inline void convPixelsAt(const Geom *g, const float *w, __m512 b0, __m512 b1,
    const float *const *xb, int64_t f0, const int64_t *off, __m512 *a0, __m512 *a1) {
  const int64_t F = g->F, K = g->KH * g->KW * g->C;
  const __mmask16 m0 = lanes(F, f0), m1 = lanes(F, f0 + 16);
#pragma GCC unroll 8
  for (int p = 0; p < PIX; p++) { a0[p] = b0; a1[p] = b1; }
  for (int64_t k = 0; k < K; k++) {
    const __m512 w0 = _mm512_maskz_loadu_ps(m0, w + k * F + f0), w1 = _mm512_maskz_loadu_ps(m1, w + k * F + f0 + 16);
#pragma GCC unroll 8
    for (int p = 0; p < PIX; p++) {
      const __m512 xv = _mm512_set1_ps(xb[p][off[k]]);
      a0[p] = _mm512_fmadd_ps(xv, w0, a0[p]);
      a1[p] = _mm512_fmadd_ps(xv, w1, a1[p]);
    }
  }
}

/*
 * The activation (ACT_RELU, ACT_CLIPPED_RELU to [0, cap], ACT_NONE) on PIX pixels' accumulators.
 * max(v, 0) is 0 for a NaN v (the second operand), as oneDNN's relu and clip give and the
 * reference's x > 0 ? x : 0.
 */
__attribute__((always_inline)) AVX512 static inline void activate(int act, float cap, __m512 *a0, __m512 *a1) {
  if (act == ACT_NONE) return;
  const __m512 zero = _mm512_setzero_ps(), top = _mm512_set1_ps(cap);
#pragma GCC unroll 8
  for (int p = 0; p < PIX; p++) {
    a0[p] = _mm512_max_ps(a0[p], zero); a1[p] = _mm512_max_ps(a1[p], zero);
    if (act == ACT_CLIPPED_RELU) { a0[p] = _mm512_min_ps(a0[p], top); a1[p] = _mm512_min_ps(a1[p], top); }
  }
}

/*
 * Output pixels (n, oh[p], ow[p]) for p < np ≤ PIX, filters [f0, f0 + 32): a0/a1[p] = bias + Σ_k
 * x·w, then the activation; windows reaching into the padding read 0 there.
 */
__attribute__((always_inline)) AVX512 static inline void convPixels(const Geom *g, const float *x, const float *w,
    __m512 b0, __m512 b1, int64_t n, const int64_t *oh, const int64_t *ow, int np, int64_t f0, const int64_t *off,
    int act, float cap, __m512 *a0, __m512 *a1) {
  const int64_t F = g->F, K = g->KH * g->KW * g->C;
  bool all = np == PIX;
  const float *xb[PIX];
#pragma GCC unroll 8
  for (int p = 0; p < PIX; p++) {
    all = all && inside(g, oh[p], ow[p]);
    xb[p] = x + ((n * g->H + oh[p] * g->sh - g->pt) * g->W + ow[p] * g->sw - g->pl) * g->C;
  }
  if (all) {
    convPixelsAt(g, w, b0, b1, xb, f0, off, a0, a1);
  } else {
    const __mmask16 m0 = lanes(F, f0), m1 = lanes(F, f0 + 16);
#pragma GCC unroll 8
    for (int p = 0; p < PIX; p++) { a0[p] = b0; a1[p] = b1; }
    for (int64_t k = 0; k < K; k++) {
      const __m512 w0 = _mm512_maskz_loadu_ps(m0, w + k * F + f0), w1 = _mm512_maskz_loadu_ps(m1, w + k * F + f0 + 16);
#pragma GCC unroll 8
      for (int p = 0; p < PIX; p++) {
        if (p >= np) break;
        const __m512 xv = _mm512_set1_ps(cell(g, x, n, oh[p], ow[p], k));
        a0[p] = _mm512_fmadd_ps(xv, w0, a0[p]);
        a1[p] = _mm512_fmadd_ps(xv, w1, a1[p]);
      }
    }
  }
  activate(act, cap, a0, a1);
}
#endif /* X86 */

#endif
