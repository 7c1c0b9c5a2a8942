/*
 * Kernels written here instead of run as oneDNN primitives, where oneDNN 2.x is slow for the shape.
 *
 * Convolutions with few input channels (a network's first layer: 1 grey or 3 colour channels).
 * oneDNN's direct kernels block over input channels, so with C = 1 they run at a fraction of the
 * machine's speed (≈ 30 GFLOPS forward and backward-weights, ≈ 9 backward-data on a 220 GFLOPS
 * core), while these layers are memory-bound: the output (forward, backward-weights' dy) is
 * KH·KW·C/F times the size of the input. Here, with AVX-512 (checked at run time; elsewhere oneDNN
 * runs them as before), each output pixel is a few broadcast FMAs per 16 filters:
 *   forward          y[p, f] = b[f] + Σ_k x[p, k]·w[k, f]          (k over the window: kh, kw, c), relu'd
 *   backward-weights dw[k, f] += Σ_p x[p, k]·dy[p, f], db[f] += Σ_p dy[p, f]
 *   backward-data    t[p, k] = Σ_f dy[p, f]·w[k, f] for a row of pixels, then dx[p's window cell k] += t[p, k]
 *                    (one vector add per window cell and 16 pixels with one channel)
 * Sums over pixels are float within one image and double across images (oneDNN's error or less).
 *
 * Max-pool backward with windows that do not overlap (stride ≥ window, the usual 2×2/2): every
 * input cell is written once, dy where it is its window's argmax and 0 elsewhere, instead of
 * zeroing dx and scattering into it (with AVX-512 or AVX2; pool.c scatters elsewhere).
 */
#include <stdlib.h>
#include <string.h>
#include "direct.h"

/* Few input channels and a small window: where these kernels beat oneDNN's (bench kernels' conv1). */
#ifndef X86
bool smallConv(const Geom *g) { (void)g; return false; }
void smallConvForward(const Geom *g, const float *x, const float *w, const float *bias, float *y, int act, float cap) { (void)g; (void)x; (void)w; (void)bias; (void)y; (void)act; (void)cap; }
bool smallConvBackwardFilter(const Geom *g, const float *x, const float *dy, float *dw, float *db) { (void)g; (void)x; (void)dy; (void)dw; (void)db; return false; }
bool smallConvBackwardData(const Geom *g, const float *dy, const float *w, float *dx) { (void)g; (void)dy; (void)w; (void)dx; return false; }
#else
bool smallConv(const Geom *g) {
  return hasAvx512() && g->C <= 4 && g->KH * g->KW * g->C <= MAX_SMALL_K;
}

/* ------------------------------------------------------------------ forward */

/* One output row (n, oh), filters [f0, f0 + 32). */
AVX512 static void forwardRow(const Geom *g, const float *x, const float *w, const float *bias, float *y,
                              int64_t n, int64_t oh, int64_t f0, const int64_t *off, int act, float cap) {
  const int64_t F = g->F;
  const __mmask16 m0 = lanes(F, f0), m1 = lanes(F, f0 + 16);
  const __m512 b0 = bias ? _mm512_maskz_loadu_ps(m0, bias + f0) : _mm512_setzero_ps();
  const __m512 b1 = bias && m1 ? _mm512_maskz_loadu_ps(m1, bias + f0 + 16) : _mm512_setzero_ps();
  for (int64_t ow0 = 0; ow0 < g->OW; ow0 += PIX) {
    const int np = g->OW - ow0 < PIX ? (int)(g->OW - ow0) : PIX;
    const int64_t ohs[PIX] = { oh, oh, oh, oh }, ows[PIX] = { ow0, ow0 + 1, ow0 + 2, ow0 + 3 };
    __m512 a0[PIX], a1[PIX];
    convPixels(g, x, w, b0, b1, n, ohs, ows, np, f0, off, act, cap, a0, a1);
    float *yp = y + ((n * g->OH + oh) * g->OW + ow0) * F + f0;
#pragma GCC unroll 8
    for (int p = 0; p < PIX; p++) {
      if (p >= np) break;
      _mm512_mask_storeu_ps(yp + p * F, m0, a0[p]);
      if (m1) _mm512_mask_storeu_ps(yp + p * F + 16, m1, a1[p]);
    }
  }
}

AVX512 void smallConvForward(const Geom *g, const float *x, const float *w, const float *bias, float *y, int act, float cap) {
  int64_t off[MAX_SMALL_K];
  windowOffsets(g, off);
  for (int64_t n = 0; n < g->N; n++)
    for (int64_t oh = 0; oh < g->OH; oh++)
      for (int64_t f0 = 0; f0 < g->F; f0 += 32) forwardRow(g, x, w, bias, y, n, oh, f0, off, act, cap);
}

/* ------------------------------------------------------------------ backward-weights */

/* Window cells per pass: KB × 2 accumulators (+ 2 for the bias) stay in registers. */
#define KB 12

/*
 * Σ over image n's pixels of x[p, k]·dy[p, f] for k in [k0, k0 + NK), f in [f0, f0 + 32), added into
 * acc (double). NK is a constant in each copy (see FILTER_BLOCK), so the accumulators are registers.
 */
__attribute__((always_inline)) AVX512 static inline void filterBlockN(const int NK, const Geom *g, const float *x, const float *dy,
    int64_t n, int64_t k0, int64_t f0, const int64_t *off, double *acc, double *bacc) {
  const int64_t F = g->F;
  const __mmask16 m0 = lanes(F, f0), m1 = lanes(F, f0 + 16);
  __m512 s0[KB], s1[KB], sb0 = _mm512_setzero_ps(), sb1 = _mm512_setzero_ps();
#pragma GCC unroll 16
  for (int i = 0; i < NK; i++) s0[i] = s1[i] = _mm512_setzero_ps();
  for (int64_t oh = 0; oh < g->OH; oh++) {
    for (int64_t ow = 0; ow < g->OW; ow++) {
      const float *d = dy + ((n * g->OH + oh) * g->OW + ow) * F + f0;
      const __m512 d0 = _mm512_maskz_loadu_ps(m0, d), d1 = _mm512_maskz_loadu_ps(m1, d + 16);
      if (bacc) { sb0 = _mm512_add_ps(sb0, d0); sb1 = _mm512_add_ps(sb1, d1); }
      if (inside(g, oh, ow)) {
        const float *xp = x + ((n * g->H + oh * g->sh - g->pt) * g->W + ow * g->sw - g->pl) * g->C;
#pragma GCC unroll 16
        for (int i = 0; i < NK; i++) {
          const __m512 xv = _mm512_set1_ps(xp[off[k0 + i]]);
          s0[i] = _mm512_fmadd_ps(xv, d0, s0[i]);
          s1[i] = _mm512_fmadd_ps(xv, d1, s1[i]);
        }
      } else {
#pragma GCC unroll 16
        for (int i = 0; i < NK; i++) {
          const __m512 xv = _mm512_set1_ps(cell(g, x, n, oh, ow, k0 + i));
          s0[i] = _mm512_fmadd_ps(xv, d0, s0[i]);
          s1[i] = _mm512_fmadd_ps(xv, d1, s1[i]);
        }
      }
    }
  }
  float t[32];
#pragma GCC unroll 16
  for (int i = 0; i < NK; i++) {
    _mm512_storeu_ps(t, s0[i]); _mm512_storeu_ps(t + 16, s1[i]);
    for (int j = 0; j < 32; j++) acc[(k0 + i) * 32 + j] += t[j];
  }
  if (bacc) {
    _mm512_storeu_ps(t, sb0); _mm512_storeu_ps(t + 16, sb1);
    for (int j = 0; j < 32; j++) bacc[j] += t[j];
  }
}

#define FILTER_BLOCK(NK) \
  case NK: filterBlockN(NK, g, x, dy, n, k0, f0, off, acc, bacc); break;

AVX512 static void filterBlock(const Geom *g, const float *x, const float *dy, int64_t n, int64_t k0, int64_t nk,
                               int64_t f0, const int64_t *off, double *acc, double *bacc) {
  switch (nk) {
    FILTER_BLOCK(1) FILTER_BLOCK(2) FILTER_BLOCK(3) FILTER_BLOCK(4) FILTER_BLOCK(5) FILTER_BLOCK(6)
    FILTER_BLOCK(7) FILTER_BLOCK(8) FILTER_BLOCK(9) FILTER_BLOCK(10) FILTER_BLOCK(11) FILTER_BLOCK(12)
  }
}

/* dw += Σ x·dy, db += Σ dy (db may be NULL); false when out of memory (the caller falls back). */
AVX512 bool smallConvBackwardFilter(const Geom *g, const float *x, const float *dy, float *dw, float *db) {
  const int64_t K = g->KH * g->KW * g->C, F = g->F;
  double *acc = malloc((size_t)(K + 1) * 32 * sizeof(double));
  if (!acc) return false;
  int64_t off[MAX_SMALL_K];
  windowOffsets(g, off);
  for (int64_t f0 = 0; f0 < F; f0 += 32) {
    memset(acc, 0, (size_t)(K + 1) * 32 * sizeof(double));
    double *bacc = db ? acc + K * 32 : NULL;
    for (int64_t n = 0; n < g->N; n++)
      for (int64_t k0 = 0; k0 < K; k0 += KB) filterBlock(g, x, dy, n, k0, K - k0 < KB ? K - k0 : KB, f0, off, acc, k0 == 0 ? bacc : NULL);
    const int64_t nf = F - f0 < 32 ? F - f0 : 32;
    for (int64_t k = 0; k < K; k++) for (int64_t j = 0; j < nf; j++) dw[k * F + f0 + j] = (float)(dw[k * F + f0 + j] + acc[k * 32 + j]);
    if (db) for (int64_t j = 0; j < nf; j++) db[f0 + j] = (float)(db[f0 + j] + bacc[j]);
  }
  free(acc);
  return true;
}

/* ------------------------------------------------------------------ backward-data */

/*
 * t[k][ow] = Σ_f dy[n, oh, ow, f]·w[k, f] for one output row, into T (K rows of OWP floats): PIX
 * pixels at a time, two FMA chains each, over 16 window cells per vector (wT: w transposed, padded).
 */
AVX512 static void rowProducts(const Geom *g, const float *dyRow, const float *wT, int64_t KV, float *T, int64_t OWP) {
  const int64_t F = g->F, K = g->KH * g->KW * g->C;
  float t[16];
  for (int64_t ow0 = 0; ow0 < g->OW; ow0 += PIX) {
    const int np = g->OW - ow0 < PIX ? (int)(g->OW - ow0) : PIX;
    for (int64_t v = 0; v < KV; v++) {
      __m512 a[PIX][2];
#pragma GCC unroll 8
      for (int p = 0; p < PIX; p++) a[p][0] = a[p][1] = _mm512_setzero_ps();
      const float *d[PIX];
#pragma GCC unroll 8
      for (int p = 0; p < PIX; p++) d[p] = dyRow + (ow0 + (p < np ? p : 0)) * F;
      int64_t f = 0;
      for (; f + 2 <= F; f += 2) {
        const __m512 w0 = _mm512_load_ps(wT + f * KV * 16 + v * 16), w1 = _mm512_load_ps(wT + (f + 1) * KV * 16 + v * 16);
#pragma GCC unroll 8
        for (int p = 0; p < PIX; p++) {
          a[p][0] = _mm512_fmadd_ps(_mm512_set1_ps(d[p][f]), w0, a[p][0]);
          a[p][1] = _mm512_fmadd_ps(_mm512_set1_ps(d[p][f + 1]), w1, a[p][1]);
        }
      }
      if (f < F) {
        const __m512 w0 = _mm512_load_ps(wT + f * KV * 16 + v * 16);
#pragma GCC unroll 8
        for (int p = 0; p < PIX; p++) a[p][0] = _mm512_fmadd_ps(_mm512_set1_ps(d[p][f]), w0, a[p][0]);
      }
      const int64_t kn = K - v * 16 < 16 ? K - v * 16 : 16;
#pragma GCC unroll 8
      for (int p = 0; p < PIX; p++) {
        if (p >= np) break;
        _mm512_storeu_ps(t, _mm512_add_ps(a[p][0], a[p][1]));
        for (int64_t k = 0; k < kn; k++) T[(v * 16 + k) * OWP + ow0 + p] = t[k];
      }
    }
  }
}

/* dx = 0, then each output pixel's window gets t[k] = Σ_f dy[p, f]·w[k, f], a row of pixels at a time; false when out of memory. */
AVX512 bool smallConvBackwardData(const Geom *g, const float *dy, const float *w, float *dx) {
  const int64_t K = g->KH * g->KW * g->C, F = g->F, C = g->C, OWP = (g->OW + 15) & ~(int64_t)15;
  /* wT[f][k]: the weights transposed, K padded to whole vectors of 16. */
  const int64_t KV = (K + 15) / 16;
  float *wT = aligned_alloc(64, (size_t)(F * KV * 16) * sizeof(float));
  float *T = aligned_alloc(64, (size_t)(K * OWP) * sizeof(float));
  if (!wT || !T) { free(wT); free(T); return false; }
  memset(wT, 0, (size_t)(F * KV * 16) * sizeof(float));
  for (int64_t k = 0; k < K; k++) for (int64_t f = 0; f < F; f++) wT[f * KV * 16 + k] = w[k * F + f];
  memset(dx, 0, (size_t)(g->N * g->H * g->W * C) * sizeof(float));
  for (int64_t n = 0; n < g->N; n++) for (int64_t oh = 0; oh < g->OH; oh++) {
    rowProducts(g, dy + (n * g->OH + oh) * g->OW * F, wT, KV, T, OWP);
    for (int64_t kh = 0; kh < g->KH; kh++) {
      const int64_t ih = oh * g->sh - g->pt + kh;
      if (ih < 0 || ih >= g->H) continue;
      float *row = dx + (n * g->H + ih) * g->W * C;
      for (int64_t kw = 0; kw < g->KW; kw++) for (int64_t c = 0; c < C; c++) {
        const float *tk = T + ((kh * g->KW + kw) * C + c) * OWP;
        /* the output columns whose window cell kw lies inside the row: iw = ow·sw − pl + kw in [0, W) */
        int64_t lo = g->pl - kw > 0 ? (g->pl - kw + g->sw - 1) / g->sw : 0, hi = g->OW;
        while (hi > lo && (hi - 1) * g->sw - g->pl + kw >= g->W) hi--;
        if (g->sw == 1 && C == 1) {
          float *o = row + lo - g->pl + kw;
          int64_t ow = lo;
          for (; ow + 16 <= hi; ow += 16) _mm512_storeu_ps(o + ow - lo, _mm512_add_ps(_mm512_loadu_ps(o + ow - lo), _mm512_loadu_ps(tk + ow)));
          if (ow < hi) {
            const __mmask16 m = lanes(hi, ow);
            _mm512_mask_storeu_ps(o + ow - lo, m, _mm512_add_ps(_mm512_maskz_loadu_ps(m, o + ow - lo), _mm512_maskz_loadu_ps(m, tk + ow)));
          }
        } else {
          for (int64_t ow = lo; ow < hi; ow++) row[(ow * g->sw - g->pl + kw) * C + c] += tk[ow];
        }
      }
    }
  }
  free(wT);
  free(T);
  return true;
}

#endif /* X86 */

/* ------------------------------------------------------------------ max-pool backward */

/* Windows that do not overlap: each input cell belongs to at most one window. */
bool poolTiles(const Geom *g) {
  return g->sh >= g->KH && g->sw >= g->KW;
}

#ifdef X86
/* Outputs with an argmax (≥ 0; −1 marks a window wholly in the padding). */
AVX512 static int64_t countArgmax(const int32_t *am, int64_t n) {
  int64_t count = 0, i = 0;
  const __m512i none = _mm512_set1_epi32(-1);
  for (; i + 16 <= n; i += 16) count += __builtin_popcount(_mm512_cmpgt_epi32_mask(_mm512_loadu_si512(am + i), none));
  for (; i < n; i++) count += am[i] >= 0;
  return count;
}

/* One window cell's channels: o[c] = d[c] where a[c] names it (its flat index first + c), else 0; returns the matches. */
typedef int64_t (*CellChannels)(float *o, const float *d, const int32_t *a, int64_t C, int32_t first);

AVX512 static int64_t cellChannels512(float *o, const float *d, const int32_t *a, int64_t C, int32_t first) {
  const __m512i iota = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  int64_t hits = 0;
  for (int64_t c = 0; c < C; c += 16) {
    const __mmask16 m = lanes(C, c);
    const __m512i at = _mm512_add_epi32(_mm512_set1_epi32(first + (int32_t)c), iota);
    const __mmask16 hit = _mm512_mask_cmpeq_epi32_mask(m, _mm512_maskz_loadu_epi32(m, a + c), at);
    _mm512_mask_storeu_ps(o + c, m, _mm512_maskz_loadu_ps(hit, d + c));
    hits += __builtin_popcount(hit);
  }
  return hits;
}

/* The same two with AVX2, for CPUs without AVX-512: 8 lanes. */
#define AVX2 __attribute__((target("avx2")))

AVX2 static int64_t countArgmax256(const int32_t *am, int64_t n) {
  int64_t count = 0, i = 0;
  const __m256i none = _mm256_set1_epi32(-1);
  for (; i + 8 <= n; i += 8) {
    const __m256i hit = _mm256_cmpgt_epi32(_mm256_loadu_si256((const __m256i *)(am + i)), none);
    count += __builtin_popcount((unsigned)_mm256_movemask_ps(_mm256_castsi256_ps(hit)));
  }
  for (; i < n; i++) count += am[i] >= 0;
  return count;
}

/* Whole vectors, then the last channels one by one (masked stores are slow on AMD's cores). */
AVX2 static int64_t cellChannels256(float *o, const float *d, const int32_t *a, int64_t C, int32_t first) {
  const __m256i iota = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  int64_t hits = 0, c = 0;
  for (; c + 8 <= C; c += 8) {
    const __m256i at = _mm256_add_epi32(_mm256_set1_epi32(first + (int32_t)c), iota);
    const __m256i hit = _mm256_cmpeq_epi32(_mm256_loadu_si256((const __m256i *)(a + c)), at);
    _mm256_storeu_ps(o + c, _mm256_and_ps(_mm256_loadu_ps(d + c), _mm256_castsi256_ps(hit)));
    hits += __builtin_popcount((unsigned)_mm256_movemask_ps(_mm256_castsi256_ps(hit)));
  }
  for (; c < C; c++) {
    const bool hit = a[c] == first + (int32_t)c;
    o[c] = hit ? d[c] : 0.0f;
    hits += hit;
  }
  return hits;
}

/*
 * Input row ih of image n, which windows of output row oh cover: each covered cell gets dy where the
 * window's argmax names it, else 0. Returns the matches. Inlined into one function per vector width
 * below, where `cells` is a constant the compiler inlines too.
 */
__attribute__((always_inline)) static inline int64_t windowRowWith(const Geom *g, float *dxRow, const float *dyRow, const int32_t *amRow,
                                                                   int64_t rowFirst, CellChannels cells) {
  const int64_t C = g->C;
  int64_t hits = 0;
  for (int64_t ow = 0; ow < g->OW; ow++) {
    for (int64_t kw = 0; kw < g->KW; kw++) {
      const int64_t iw = ow * g->sw - g->pl + kw;
      if (iw < 0 || iw >= g->W) continue;
      hits += cells(dxRow + iw * C, dyRow + ow * C, amRow + ow * C, C, (int32_t)(rowFirst + iw * C));
    }
  }
  return hits;
}

AVX512 static int64_t windowRow512(const Geom *g, float *dxRow, const float *dyRow, const int32_t *amRow, int64_t rowFirst) {
  return windowRowWith(g, dxRow, dyRow, amRow, rowFirst, cellChannels512);
}

AVX2 static int64_t windowRow256(const Geom *g, float *dxRow, const float *dyRow, const int32_t *amRow, int64_t rowFirst) {
  return windowRowWith(g, dxRow, dyRow, amRow, rowFirst, cellChannels256);
}

/*
 * dx (overwritten) from dy through argmax, for windows that do not overlap (poolTiles), with AVX-512
 * or AVX2.
 * Returns how many outputs with argmax ≥ 0 did not name a cell of their own window (0 for an argmax
 * from maxPoolForward of this geometry; those gradients are dropped, never written elsewhere), or
 * −1 when this kernel does not run here (neither AVX-512 nor AVX2, out of memory): the caller scatters instead.
 */
int64_t maxPoolBackwardTiles(const Geom *g, const float *dy, const int32_t *argmax, float *dx) {
  const bool wide = hasAvx512();
  if (!wide && !__builtin_cpu_supports("avx2")) return -1;
  const int64_t C = g->C, rowLen = g->W * C, outRow = g->OW * C;
  /* Per input row: the output row whose windows cover it, or −1 (a gap, or unused last rows). */
  int64_t *rowOf = malloc((size_t)g->H * sizeof(int64_t));
  bool *colCovered = calloc((size_t)g->W + 1, 1);
  if (!rowOf || !colCovered) { free(rowOf); free(colCovered); return -1; }
  for (int64_t ih = 0; ih < g->H; ih++) rowOf[ih] = -1;
  for (int64_t oh = 0; oh < g->OH; oh++) for (int64_t kh = 0; kh < g->KH; kh++) {
    const int64_t ih = oh * g->sh - g->pt + kh;
    if (ih >= 0 && ih < g->H) rowOf[ih] = oh;
  }
  bool gaps = false;
  for (int64_t ow = 0; ow < g->OW; ow++) for (int64_t kw = 0; kw < g->KW; kw++) {
    const int64_t iw = ow * g->sw - g->pl + kw;
    if (iw >= 0 && iw < g->W) colCovered[iw] = true;
  }
  for (int64_t iw = 0; iw < g->W; iw++) gaps |= !colCovered[iw];
  int64_t hits = 0;
  for (int64_t n = 0; n < g->N; n++) {
    for (int64_t ih = 0; ih < g->H; ih++) {
      float *row = dx + (n * g->H + ih) * rowLen;
      const int64_t oh = rowOf[ih];
      if (oh < 0) { memset(row, 0, (size_t)rowLen * sizeof(float)); continue; }
      if (gaps) for (int64_t iw = 0; iw < g->W; iw++) if (!colCovered[iw]) memset(row + iw * C, 0, (size_t)C * sizeof(float));
      const int64_t o = (n * g->OH + oh) * outRow;
      hits += (wide ? windowRow512 : windowRow256)(g, row, dy + o, argmax + o, (n * g->H + ih) * rowLen);
    }
  }
  free(rowOf);
  free(colCovered);
  return (wide ? countArgmax : countArgmax256)(argmax, g->N * g->OH * outRow) - hits;
}
#else
int64_t maxPoolBackwardTiles(const Geom *g, const float *dy, const int32_t *argmax, float *dx) { (void)g; (void)dy; (void)argmax; (void)dx; return -1; }
#endif
