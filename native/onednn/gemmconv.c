/*
 * A convolution's filter gradient as im2col + oneDNN's sgemm, on x86 CPUs without AVX-512.
 *
 * oneDNN 2.6's backward-weights kernel for AVX2 (jit:avx2) runs mnist-small's conv2 (13²×32 →
 * 11²×64, 3×3) at 33–38 GFLOPS on a Zen 3 whose FMA peak is 100; its gemm-based one (x64:gemm:jit)
 * at 34. The same product as dw[K×F] += colᵀ[K×P]·dy[P×F] — col holding each output pixel's window
 * (kh, kw, c: the order of w's rows), P output pixels at a time so that col stays in the L2 cache —
 * runs at 75 through dnnl_sgemm. With AVX-512 the primitive (brgconv) is left as it is: it met its
 * targets there; so is a window shorter than MIN_WINDOW. dw and db accumulate (the Backend
 * contract); db sums in double, like sumRows.
 */
#include <stdlib.h>
#include <string.h>
#include "direct.h"

/*
 * The shortest window taken: with few input channels sgemm's M (the window) is too short for its
 * kernels (conv1 of mnist-small, 3·3·1: 5 GFLOPS here against the primitive's 14).
 */
#define MIN_WINDOW 64

/* Floats of col per chunk: 128 K floats (512 KB), a Zen 3 core's L2. */
#define CHUNK_FLOATS (128 * 1024)

bool gemmFilterGradient(const Geom *g) {
#ifdef X86
  return !hasAvx512() && g->KH * g->KW * g->C >= MIN_WINDOW;
#else
  (void)g;
  return false;
#endif
}

/* Output pixel q's window (kh, kw, c order) into c; cells in the padding are 0. */
static void windowOf(const Geom *g, const float *x, int64_t q, float *c) {
  const int64_t C = g->C, KWC = g->KW * C;
  const int64_t n = q / (g->OH * g->OW), oh = q / g->OW % g->OH, ow = q % g->OW;
  const int64_t ih0 = oh * g->sh - g->pt, iw0 = ow * g->sw - g->pl;
  const bool colsInside = iw0 >= 0 && iw0 + g->KW <= g->W;
  for (int64_t kh = 0; kh < g->KH; kh++, c += KWC) {
    const int64_t ih = ih0 + kh;
    if (ih < 0 || ih >= g->H) { memset(c, 0, (size_t)KWC * sizeof(float)); continue; }
    const float *row = x + (n * g->H + ih) * g->W * C;
    if (colsInside) { memcpy(c, row + iw0 * C, (size_t)KWC * sizeof(float)); continue; }
    for (int64_t kw = 0; kw < g->KW; kw++) {
      const int64_t iw = iw0 + kw;
      if (iw < 0 || iw >= g->W) memset(c + kw * C, 0, (size_t)C * sizeof(float));
      else memcpy(c + kw * C, row + iw * C, (size_t)C * sizeof(float));
    }
  }
}

bool gemmConvBackwardFilter(const Geom *g, const float *x, const float *dy, float *dw, float *db) {
  const int64_t K = g->KH * g->KW * g->C, F = g->F, P = g->N * g->OH * g->OW;
  const int64_t chunk = CHUNK_FLOATS / K > 0 ? CHUNK_FLOATS / K : 1;
  float *col = malloc((size_t)((chunk < P ? chunk : P) * K) * sizeof(float));
  if (!col) return false;
  for (int64_t p0 = 0; p0 < P; p0 += chunk) {
    const int64_t np = P - p0 < chunk ? P - p0 : chunk;
    for (int64_t p = 0; p < np; p++) windowOf(g, x, p0 + p, col + p * K);
    if (sgemm('T', 'N', K, F, np, 1.0f, col, K, dy + p0 * F, F, 1.0f, dw, F) != dnnl_success) { free(col); return false; }
  }
  free(col);
  if (db) {
    for (int64_t f = 0; f < F; f++) {
      double s = 0;
      for (int64_t r = 0; r < P; r++) s += dy[r * F + f];
      db[f] = (float)(db[f] + s);
    }
  }
  return true;
}
