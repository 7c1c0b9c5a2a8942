/*
 * A convolution with few input channels (direct.c's kind), its activation and a max pool whose
 * windows tile the convolution's output (stride = window, no padding: the usual 2×2/2), as one pass
 * that never writes the convolution's output: convPoolForward gives the pool's output and argmax
 * exactly as conv2dForward, activationForward and maxPoolForward would, and
 * conv2dBackwardFilterPooled the filter and bias gradients from the pooled gradient (the
 * activation's backward applied on the pool's output, by the caller or here), as if the pooled
 * gradient had been scattered through argmax into a gradient of the convolution's output.
 *
 * Why: a network's first convolution writes its largest activation (mnist-small: 64·26·26·32
 * floats, 5.5 MB) only for the pool to read it back, and its backward scatters the pooled gradient
 * into an array as large for the filter gradient to read; four passes over memory the size of
 * the L2 cache many times, for ≈ 25 MFLOP of work. Here each pooled output computes its window's
 * KH·KW convolution pixels in registers (PIX at a time), keeps the first maximum (strictly greater
 * wins, in window order, as maxPoolForward), and the backward gathers, per window cell, the lanes
 * whose argmax names it.
 */
#include "direct.h"

/* What the pool's geometry (q: F unused, C channels) must be for the fused kernels, given the convolution's (g). */
static bool fits(const Geom *g, const Geom *q) {
  return smallConv(g) && q->N == g->N && q->H == g->OH && q->W == g->OW && q->C == g->F && q->KH >= 1 && q->KW >= 1 &&
         q->sh == q->KH && q->sw == q->KW && q->pt == 0 && q->pl == 0 && q->OH * q->KH <= g->OH && q->OW * q->KW <= g->OW &&
         q->KH * q->KW <= 64;
}

#ifdef X86
/*
 * Per cell c of a pool window (in window order): the offset in x of its convolution window's first
 * input cell from the first cell's, and its flat offset in the convolution's output from the first
 * cell's; and whether every window lies inside the image (then no cell reads padding).
 */
typedef struct { int64_t x[64], out[64]; bool inside; } Cells;

static void cellsOf(const Geom *g, const Geom *q, Cells *t) {
  for (int64_t c = 0; c < q->KH * q->KW; c++) {
    const int64_t dh = c / q->KW, dw = c % q->KW;
    t->x[c] = (dh * g->sh * g->W + dw * g->sw) * g->C;
    t->out[c] = (dh * g->OW + dw) * g->F;
  }
  /* inside() grows monotonically along each axis: the first and last used outputs decide */
  t->inside = inside(g, 0, 0) && inside(g, q->OH * q->KH - 1, q->OW * q->KW - 1);
}

/* The first input cell (in x) of the window of convolution output (n, oh, ow): valid when it lies inside. */
static inline const float *windowStart(const Geom *g, const float *x, int64_t n, int64_t oh, int64_t ow) {
  return x + ((n * g->H + oh * g->sh - g->pt) * g->W + ow * g->sw - g->pl) * g->C;
}

AVX512 static void forward(const Geom *g, const Geom *q, const float *x, const float *w, const float *bias, float *y,
                           int32_t *argmax, int act, float cap) {
  int64_t off[MAX_SMALL_K];
  windowOffsets(g, off);
  Cells t;
  cellsOf(g, q, &t);
  const __m512i iota = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15), sixteen = _mm512_set1_epi32(16);
  const int64_t F = g->F, cells = q->KH * q->KW;
  for (int64_t f0 = 0; f0 < F; f0 += 32) {
    const __mmask16 m0 = lanes(F, f0), m1 = lanes(F, f0 + 16);
    const __m512 b0 = bias ? _mm512_maskz_loadu_ps(m0, bias + f0) : _mm512_setzero_ps();
    const __m512 b1 = bias && m1 ? _mm512_maskz_loadu_ps(m1, bias + f0 + 16) : _mm512_setzero_ps();
    for (int64_t n = 0; n < g->N; n++) for (int64_t ph = 0; ph < q->OH; ph++) for (int64_t pw = 0; pw < q->OW; pw++) {
      const int64_t oh0 = ph * q->KH, ow0 = pw * q->KW, base = ((n * g->OH + oh0) * g->OW + ow0) * F + f0;
      const float *xw = windowStart(g, x, n, oh0, ow0);
      __m512 best0 = _mm512_setzero_ps(), best1 = _mm512_setzero_ps();
      __m512i at0 = _mm512_setzero_si512(), at1 = _mm512_setzero_si512();
      for (int64_t c0 = 0; c0 < cells; c0 += PIX) {
        const int np = cells - c0 < PIX ? (int)(cells - c0) : PIX;
        __m512 a0[PIX], a1[PIX];
        if (t.inside) {
          const float *xb[PIX];
#pragma GCC unroll 8
          for (int p = 0; p < PIX; p++) xb[p] = xw + t.x[c0 + (p < np ? p : 0)];
          convPixelsAt(g, w, b0, b1, xb, f0, off, a0, a1);
          activate(act, cap, a0, a1);
        } else {
          int64_t oh[PIX], ow[PIX];
          for (int p = 0; p < PIX; p++) {
            const int64_t c = c0 + (p < np ? p : 0);
            oh[p] = oh0 + c / q->KW; ow[p] = ow0 + c % q->KW;
          }
          convPixels(g, x, w, b0, b1, n, oh, ow, np, f0, off, act, cap, a0, a1);
        }
#pragma GCC unroll 8
        for (int p = 0; p < PIX; p++) {
          if (p >= np) break;
          const __m512i i0 = _mm512_add_epi32(_mm512_set1_epi32((int32_t)(base + t.out[c0 + p])), iota), i1 = _mm512_add_epi32(i0, sixteen);
          if (c0 + p == 0) { best0 = a0[p]; best1 = a1[p]; at0 = i0; at1 = i1; continue; }
          /* strictly greater (ordered: a NaN never takes over), so ties keep the first cell, as maxPoolForward */
          const __mmask16 k0 = _mm512_cmp_ps_mask(a0[p], best0, _CMP_GT_OQ), k1 = _mm512_cmp_ps_mask(a1[p], best1, _CMP_GT_OQ);
          best0 = _mm512_mask_mov_ps(best0, k0, a0[p]); at0 = _mm512_mask_mov_epi32(at0, k0, i0);
          best1 = _mm512_mask_mov_ps(best1, k1, a1[p]); at1 = _mm512_mask_mov_epi32(at1, k1, i1);
        }
      }
      const int64_t o = ((n * q->OH + ph) * q->OW + pw) * F + f0;
      _mm512_mask_storeu_ps(y + o, m0, best0); _mm512_mask_storeu_epi32(argmax + o, m0, at0);
      if (m1) { _mm512_mask_storeu_ps(y + o + 16, m1, best1); _mm512_mask_storeu_epi32(argmax + o + 16, m1, at1); }
    }
  }
}

/* Per window cell k of the convolution: its row, column and channel offsets, for the cells of windows that reach into the padding. */
typedef struct { int64_t dh[MAX_SMALL_K], dw[MAX_SMALL_K], c[MAX_SMALL_K]; } WindowCells;

static void windowCellsOf(const Geom *g, WindowCells *k) {
  for (int64_t kh = 0, i = 0; kh < g->KH; kh++)
    for (int64_t kw = 0; kw < g->KW; kw++)
      for (int64_t c = 0; c < g->C; c++, i++) { k->dh[i] = kh; k->dw[i] = kw; k->c[i] = c; }
}

/* The activation whose backward the pooled filter gradient applies itself (y NULL: dyPool is already through it). */
typedef struct { const float *y; int act; float cap; } Through;

/* Window cells (KH·KW·C) per pass of the pooled filter gradient: 2 accumulators each stay in registers. */
#define KP 12
/* Pooled outputs ahead to prefetch (a prefetch never faults, past the end too). */
#define PF 6

/*
 * Image n's part of dw[k, f] (k0 ≤ k < k0 + NK), f in [f0, f0 + 32), and of db (when bacc), added
 * into acc / bacc (double): per pooled output and window cell, the lanes whose argmax names the
 * cell take their pooled gradient times the cell's inputs. NK is a constant in each copy (see BLOCK).
 */
__attribute__((always_inline)) AVX512 static inline void filterImage(const int NK, const Geom *g, const Geom *q, const Cells *t,
    const WindowCells *wc, const float *x, const float *dy, const int32_t *argmax, const Through *through, int64_t n, int64_t k0, int64_t f0,
    const int64_t *off, double *acc, double *bacc) {
  const __m512i iota = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15), sixteen = _mm512_set1_epi32(16);
  const int64_t F = g->F;
  const __mmask16 m0 = lanes(F, f0), m1 = lanes(F, f0 + 16);
  __m512 s0[KP], s1[KP], sb0 = _mm512_setzero_ps(), sb1 = _mm512_setzero_ps();
#pragma GCC unroll 16
  for (int i = 0; i < NK; i++) s0[i] = s1[i] = _mm512_setzero_ps();
  for (int64_t ph = 0; ph < q->OH; ph++) for (int64_t pw = 0; pw < q->OW; pw++) {
    const int64_t o = ((n * q->OH + ph) * q->OW + pw) * F + f0;
    /* the pooled gradient and argmax stream in from memory (argmax was written a whole pass ago): ask ahead */
    _mm_prefetch((const char *)(dy + o + PF * F), _MM_HINT_T0); _mm_prefetch((const char *)(dy + o + PF * F + 16), _MM_HINT_T0);
    _mm_prefetch((const char *)(argmax + o + PF * F), _MM_HINT_T0); _mm_prefetch((const char *)(argmax + o + PF * F + 16), _MM_HINT_T0);
    __m512 d0 = _mm512_maskz_loadu_ps(m0, dy + o), d1 = _mm512_maskz_loadu_ps(m1, dy + o + 16);
    if (through->y) {
      /* the activation's backward from the pool's output: relu passes where y > 0, clipped relu where 0 < y < cap */
      _mm_prefetch((const char *)(through->y + o + PF * F), _MM_HINT_T0); _mm_prefetch((const char *)(through->y + o + PF * F + 16), _MM_HINT_T0);
      const __m512 y0 = _mm512_maskz_loadu_ps(m0, through->y + o), y1 = _mm512_maskz_loadu_ps(m1, through->y + o + 16), zero = _mm512_setzero_ps();
      __mmask16 pass0 = _mm512_cmp_ps_mask(y0, zero, _CMP_GT_OQ), pass1 = _mm512_cmp_ps_mask(y1, zero, _CMP_GT_OQ);
      if (through->act == ACT_CLIPPED_RELU) {
        const __m512 top = _mm512_set1_ps(through->cap);
        pass0 &= _mm512_cmp_ps_mask(y0, top, _CMP_LT_OQ); pass1 &= _mm512_cmp_ps_mask(y1, top, _CMP_LT_OQ);
      }
      d0 = _mm512_maskz_mov_ps(pass0, d0); d1 = _mm512_maskz_mov_ps(pass1, d1);
    }
    const __m512i a0 = _mm512_maskz_loadu_epi32(m0, argmax + o), a1 = _mm512_maskz_loadu_epi32(m1, argmax + o + 16);
    sb0 = _mm512_add_ps(sb0, d0); sb1 = _mm512_add_ps(sb1, d1);
    const int64_t oh0 = ph * q->KH, ow0 = pw * q->KW, base = ((n * g->OH + oh0) * g->OW + ow0) * F + f0;
    const float *xw = windowStart(g, x, n, oh0, ow0);
    for (int64_t c = 0; c < q->KH * q->KW; c++) {
      const int64_t oh = oh0 + c / q->KW, ow = ow0 + c % q->KW;
      const __m512i i0 = _mm512_add_epi32(_mm512_set1_epi32((int32_t)(base + t->out[c])), iota);
      const __mmask16 hit0 = _mm512_mask_cmpeq_epi32_mask(m0, a0, i0);
      const __mmask16 hit1 = _mm512_mask_cmpeq_epi32_mask(m1, a1, _mm512_add_epi32(i0, sixteen));
      if (!(hit0 | hit1)) continue;
      const __m512 e0 = _mm512_maskz_mov_ps(hit0, d0), e1 = _mm512_maskz_mov_ps(hit1, d1);
      /* a padded convolution: only the windows at the image's edge reach into the padding, so only they check each cell */
      if (t->inside || inside(g, oh, ow)) {
        const float *xp = xw + t->x[c];
#pragma GCC unroll 16
        for (int i = 0; i < NK; i++) {
          const __m512 xv = _mm512_set1_ps(xp[off[k0 + i]]);
          s0[i] = _mm512_fmadd_ps(xv, e0, s0[i]); s1[i] = _mm512_fmadd_ps(xv, e1, s1[i]);
        }
      } else {
        const int64_t ih0 = oh * g->sh - g->pt, iw0 = ow * g->sw - g->pl;
#pragma GCC unroll 16
        for (int i = 0; i < NK; i++) {
          const int64_t ih = ih0 + wc->dh[k0 + i], iw = iw0 + wc->dw[k0 + i];
          const float v = ih >= 0 && ih < g->H && iw >= 0 && iw < g->W ? x[((n * g->H + ih) * g->W + iw) * g->C + wc->c[k0 + i]] : 0.0f;
          const __m512 xv = _mm512_set1_ps(v);
          s0[i] = _mm512_fmadd_ps(xv, e0, s0[i]); s1[i] = _mm512_fmadd_ps(xv, e1, s1[i]);
        }
      }
    }
  }
  float sums[32];
#pragma GCC unroll 16
  for (int i = 0; i < NK; i++) {
    _mm512_storeu_ps(sums, s0[i]); _mm512_storeu_ps(sums + 16, s1[i]);
    for (int j = 0; j < 32; j++) acc[(k0 + i) * 32 + j] += sums[j];
  }
  if (bacc) {
    _mm512_storeu_ps(sums, sb0); _mm512_storeu_ps(sums + 16, sb1);
    for (int j = 0; j < 32; j++) bacc[j] += sums[j];
  }
}

#define BLOCK(NK) case NK: filterImage(NK, g, q, &t, &wc, x, dy, argmax, through, n, k0, f0, off, acc, k0 == 0 ? bacc : NULL); break;

AVX512 static bool filterPooled(const Geom *g, const Geom *q, const float *x, const float *dy, const int32_t *argmax, const Through *through,
                                float *dw, float *db) {
  const int64_t K = g->KH * g->KW * g->C, F = g->F;
  double *acc = malloc((size_t)(K + 1) * 32 * sizeof(double));
  if (!acc) return false;
  int64_t off[MAX_SMALL_K];
  windowOffsets(g, off);
  Cells t;
  cellsOf(g, q, &t);
  WindowCells wc;
  windowCellsOf(g, &wc);
  for (int64_t f0 = 0; f0 < F; f0 += 32) {
    memset(acc, 0, (size_t)(K + 1) * 32 * sizeof(double));
    double *bacc = db ? acc + K * 32 : NULL;
    for (int64_t n = 0; n < g->N; n++) {
      for (int64_t k0 = 0; k0 < K; k0 += KP) {
        switch (K - k0 < KP ? K - k0 : KP) {
          BLOCK(1) BLOCK(2) BLOCK(3) BLOCK(4) BLOCK(5) BLOCK(6) BLOCK(7) BLOCK(8) BLOCK(9) BLOCK(10) BLOCK(11) BLOCK(12)
        }
      }
    }
    const int64_t nf = F - f0 < 32 ? F - f0 : 32;
    for (int64_t k = 0; k < K; k++) for (int64_t j = 0; j < nf; j++) dw[k * F + f0 + j] = (float)(dw[k * F + f0 + j] + acc[k * 32 + j]);
    if (db) for (int64_t j = 0; j < nf; j++) db[f0 + j] = (float)(db[f0 + j] + bacc[j]);
  }
  free(acc);
  return true;
}
#endif

/* Reads the arrays' pointers and lengths; false after throwing. */
static bool arrays(napi_env env, napi_value *argv, const char *fn, const char *const *names, const bool *nullable,
                   const bool *isInt, int n, void **ptrs, size_t *lens) {
  for (int i = 0; i < n; i++) {
    bool ok = isInt[i] ? getI32(env, argv[i], fn, names[i], (int32_t **)&ptrs[i], &lens[i])
                       : getF32(env, argv[i], fn, names[i], nullable[i], (float **)&ptrs[i], &lens[i]);
    if (!ok) return false;
  }
  return true;
}

/*
 * convPoolForward(x, w, bias | null, y, argmax, N, H, W, C, KH, KW, F, sh, sw, pt, pl, OH, OW,
 *                 pool N, H, W, C, KH, KW, sh, sw, pt, pl, OH, OW, act, cap) → fused?
 * y and argmax: the pool's output; act: ACT_RELU, ACT_CLIPPED_RELU (to [0, cap]) or ACT_NONE.
 */
napi_value ConvPoolForward(napi_env env, napi_callback_info info) {
  const char *fn = "convPoolForward";
  napi_value argv[32];
  if (!getArgs(env, info, 32, argv, "convPoolForward(x, w, bias, y, argmax, ...conv geometry (13), ...pool geometry (12), act, cap)")) return NULL;
  Geom g, q;
  if (!getGeom(env, argv + 5, fn, true, &g) || !getGeom(env, argv + 18, fn, false, &q)) return NULL;
  static const char *const actName[] = { "activation code" };
  int64_t act;
  double cap;
  if (!getInts(env, argv + 30, 1, fn, actName, &act) || !getNumber(env, argv[31], fn, "cap", &cap)) return NULL;
  static const char *const names[] = { "x", "w", "bias", "y", "argmax" };
  static const bool nullable[] = { false, false, true, false, false }, isInt[] = { false, false, false, false, true };
  void *p[5];
  size_t l[5];
  if (!arrays(env, argv, fn, names, nullable, isInt, 5, p, l)) return NULL;
  const int64_t out = q.N * q.OH * q.OW * q.C;
  if (!need(env, fn, "x", l[0], g.N * g.H * g.W * g.C) || !need(env, fn, "w", l[1], g.KH * g.KW * g.C * g.F) ||
      (p[2] && !need(env, fn, "bias", l[2], g.F)) || !need(env, fn, "y", l[3], out) || !need(env, fn, "argmax", l[4], out)) return NULL;
  Instance *inst = instance(env);
  if (inst->noDirect || (act != ACT_RELU && act != ACT_CLIPPED_RELU && act != ACT_NONE) || !fits(&g, &q) || out == 0) return boolValue(env, false);
#ifdef X86
  forward(&g, &q, p[0], p[1], p[2], p[3], p[4], (int)act, (float)cap);
  inst->direct[PLAN_CONV_FWD]++;
  return boolValue(env, true);
#else
  return boolValue(env, false);
#endif
}

/*
 * conv2dBackwardFilterPooled(x, dyPool, argmax, dw, db | null, ...conv geometry (13), ...pool geometry (12), act, yPool | null, cap) → fused?
 * dw, db += the gradients of the convolution whose output gradient is dyPool scattered through
 * argmax; with yPool (the pool's output), dyPool is taken before the activation's backward, which
 * is applied here (act: ACT_RELU, ACT_CLIPPED_RELU to [0, cap]).
 */
napi_value Conv2dBackwardFilterPooled(napi_env env, napi_callback_info info) {
  const char *fn = "conv2dBackwardFilterPooled";
  napi_value argv[33];
  if (!getArgs(env, info, 33, argv, "conv2dBackwardFilterPooled(x, dyPool, argmax, dw, db, ...conv geometry (13), ...pool geometry (12), act, yPool, cap)")) return NULL;
  Geom g, q;
  if (!getGeom(env, argv + 5, fn, true, &g) || !getGeom(env, argv + 18, fn, false, &q)) return NULL;
  static const char *const names[] = { "x", "dyPool", "argmax", "dw", "db" };
  static const bool nullable[] = { false, false, false, false, true }, isInt[] = { false, false, true, false, false };
  static const char *const actName[] = { "activation code" };
  void *p[5];
  size_t l[5], ly = 0;
  int64_t act;
  double cap;
  float *yPool = NULL;
  if (!arrays(env, argv, fn, names, nullable, isInt, 5, p, l) || !getInts(env, argv + 30, 1, fn, actName, &act) ||
      !getF32(env, argv[31], fn, "yPool", true, &yPool, &ly) || !getNumber(env, argv[32], fn, "cap", &cap)) return NULL;
  const int64_t out = q.N * q.OH * q.OW * q.C, K = g.KH * g.KW * g.C;
  if (!need(env, fn, "x", l[0], g.N * g.H * g.W * g.C) || !need(env, fn, "dyPool", l[1], out) || !need(env, fn, "argmax", l[2], out) ||
      !need(env, fn, "dw", l[3], K * g.F) || (p[4] && !need(env, fn, "db", l[4], g.F)) || (yPool && !need(env, fn, "yPool", ly, out))) return NULL;
  Instance *inst = instance(env);
  if (inst->noDirect || !fits(&g, &q) || K == 0 || (yPool && act != ACT_RELU && act != ACT_CLIPPED_RELU)) return boolValue(env, false);
#ifdef X86
  const Through through = { yPool, (int)act, (float)cap };
  if (!filterPooled(&g, &q, p[0], p[1], p[2], &through, p[3], p[4])) return boolValue(env, false);
  inst->direct[PLAN_CONV_BWD_WEIGHTS]++;
  return boolValue(env, true);
#else
  return boolValue(env, false);
#endif
}
