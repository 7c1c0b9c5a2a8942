/*
 * 2-D pooling on NHWC memory. Max and average forward and average backward are oneDNN pooling
 * primitives on the caller's arrays; average pooling excludes padded cells from the count
 * (`pooling_avg_exclude_padding`, the Backend's count_include_pad = false).
 *
 * Max pooling's `argmax` is the Backend's own format: the flat index into x of each output's
 * maximum. The forward is done in C (maxPoolPlain, one pass); with the addon's own kernels off
 * (setDirect(false)) it runs oneDNN's training-mode primitive, whose workspace holds each
 * maximum's position within its window (kh·KW + kw, u8 or s32), and one pass here turns that
 * into the flat index. The max backward is done in C: it needs no oneDNN workspace and is bound by
 * memory anyway. With windows that do not overlap (2×2/2), direct.c writes each cell of dx once;
 * otherwise it is a scatter of dy through argmax (dx[argmax[i]] += dy[i] after zeroing dx).
 *
 * A window lying wholly in the padding has no maximum and no mean: the Backend gives 0 (argmax
 * −1), set here after oneDNN ran. When oneDNN has no primitive for a geometry the call returns
 * false and the TypeScript side runs the base backend's kernel instead.
 */
#include <string.h>
#include "onednn.h"

static Key poolKey(int kind, const Geom *g) {
  return (Key){ { kind, g->N, g->H, g->W, g->C, g->KH, g->KW, g->sh, g->sw, g->pt, g->pl, g->OH, g->OW } };
}

typedef struct {
  dnnl_memory_desc_t src, dst;
  dnnl_dims_t strides, kernel, dilation, padL, padR;
} PoolMds;

static bool poolMds(const Geom *g, PoolMds *m) {
  const dnnl_dims_t sd = { g->N, g->C, g->H, g->W }, dd = { g->N, g->C, g->OH, g->OW };
  m->strides[0] = g->sh; m->strides[1] = g->sw;
  m->kernel[0] = g->KH; m->kernel[1] = g->KW;
  m->dilation[0] = 0; m->dilation[1] = 0;
  m->padL[0] = g->pt; m->padL[1] = g->pl;
  m->padR[0] = g->pb; m->padR[1] = g->pr;
  return dnnl_memory_desc_init_by_tag(&m->src, 4, sd, dnnl_f32, dnnl_nhwc) == dnnl_success &&
         dnnl_memory_desc_init_by_tag(&m->dst, 4, dd, dnnl_f32, dnnl_nhwc) == dnnl_success;
}

static dnnl_primitive_desc_t forwardPd(Instance *inst, PoolMds *m, dnnl_alg_kind_t alg) {
  dnnl_pooling_v2_desc_t d;
  dnnl_primitive_desc_t pd = NULL;
  if (dnnl_pooling_v2_forward_desc_init(&d, dnnl_forward_training, alg, &m->src, &m->dst, m->strides, m->kernel,
        m->dilation, m->padL, m->padR) != dnnl_success) return NULL;
  if (dnnl_primitive_desc_create(&pd, &d, NULL, inst->engine, NULL) != dnnl_success) return NULL;
  return pd;
}

/* A plain (unblocked) u8 or s32 workspace: the only kind the argmax conversion reads. */
static bool plainWorkspace(const dnnl_memory_desc_t *ws) {
  return ws && ws->ndims == 4 && ws->format_kind == dnnl_blocked && ws->format_desc.blocking.inner_nblks == 0 &&
         (ws->data_type == dnnl_u8 || ws->data_type == dnnl_s32);
}

/* Forward, slots 0 x, 1 y; max pooling keeps its workspace (p->aux[0]). */
static Plan *forwardPlan(Instance *inst, const Geom *g, bool max) {
  const int kind = max ? PLAN_POOL_MAX_FWD : PLAN_POOL_AVG_FWD;
  const Key key = poolKey(kind, g);
  Plan *p = planFind(inst, &key);
  if (p) return p;
  p = planNew(inst, &key);
  PoolMds m;
  dnnl_primitive_desc_t pd = poolMds(g, &m) ? forwardPd(inst, &m, max ? dnnl_pooling_max : dnnl_pooling_avg_exclude_padding) : NULL;
  bool ok = pd != NULL;
  if (ok) {
    const int x = planMem(inst, p, &m.src, 0), y = planMem(inst, p, &m.dst, 1);
    if (max) {
      const dnnl_memory_desc_t *wsMd = dnnl_primitive_desc_query_md(pd, dnnl_query_workspace_md, 0);
      p->aux[0] = plainWorkspace(wsMd) ? planMem(inst, p, wsMd, -1) : -1;
      const ArgRef args[] = { { DNNL_ARG_SRC, x }, { DNNL_ARG_DST, y }, { DNNL_ARG_WORKSPACE, p->aux[0] } };
      ok = p->aux[0] >= 0 && planStep(p, pd, 3, args);
    } else {
      const ArgRef args[] = { { DNNL_ARG_SRC, x }, { DNNL_ARG_DST, y } };
      ok = planStep(p, pd, 2, args);
    }
  }
  if (ok) planCreated(inst, p, kind, pd);
  else { planFree(p); p = NULL; }
  if (pd) dnnl_primitive_desc_destroy(pd);
  return p;
}

/* Average backward, slots 0 dy, 1 dx. */
static Plan *avgBackwardPlan(Instance *inst, const Geom *g) {
  const Key key = poolKey(PLAN_POOL_AVG_BWD, g);
  Plan *p = planFind(inst, &key);
  if (p) return p;
  p = planNew(inst, &key);
  PoolMds m;
  dnnl_primitive_desc_t hint = poolMds(g, &m) ? forwardPd(inst, &m, dnnl_pooling_avg_exclude_padding) : NULL, pd = NULL;
  dnnl_pooling_v2_desc_t d;
  bool ok = hint &&
    dnnl_pooling_v2_backward_desc_init(&d, dnnl_pooling_avg_exclude_padding, &m.src, &m.dst, m.strides, m.kernel,
                                       m.dilation, m.padL, m.padR) == dnnl_success &&
    dnnl_primitive_desc_create(&pd, &d, NULL, inst->engine, hint) == dnnl_success;
  if (ok) {
    const int dy = planMem(inst, p, &m.dst, 0), dx = planMem(inst, p, &m.src, 1);
    const ArgRef args[] = { { DNNL_ARG_DIFF_DST, dy }, { DNNL_ARG_DIFF_SRC, dx } };
    ok = planStep(p, pd, 2, args);
  }
  if (ok) planCreated(inst, p, PLAN_POOL_AVG_BWD, pd);
  else { planFree(p); p = NULL; }
  if (pd) dnnl_primitive_desc_destroy(pd);
  if (hint) dnnl_primitive_desc_destroy(hint);
  return p;
}

static inline bool emptyRange(int64_t start, int64_t k, int64_t size) { return start + k <= 0 || start >= size; }

/* Outputs whose window is all padding: y = 0 and (max pooling) argmax = −1. */
static void clearEmptyWindows(const Geom *g, float *y, int32_t *argmax) {
  for (int64_t oh = 0; oh < g->OH; oh++) {
    const bool rowEmpty = emptyRange(oh * g->sh - g->pt, g->KH, g->H);
    for (int64_t ow = 0; ow < g->OW; ow++) {
      if (!rowEmpty && !emptyRange(ow * g->sw - g->pl, g->KW, g->W)) continue;
      for (int64_t n = 0; n < g->N; n++) {
        const int64_t o = ((n * g->OH + oh) * g->OW + ow) * g->C;
        memset(y + o, 0, (size_t)g->C * sizeof(float));
        if (argmax) for (int64_t c = 0; c < g->C; c++) argmax[o + c] = -1;
      }
    }
  }
}

/* argmax[n, oh, ow, c] = flat index into x of the window position the workspace names. */
static void workspaceToArgmax(const Geom *g, dnnl_memory_t wsMem, int32_t *argmax) {
  const dnnl_memory_desc_t *md = NULL;
  void *ws = NULL;
  dnnl_memory_get_memory_desc(wsMem, &md);
  dnnl_memory_get_data_handle(wsMem, &ws);
  const dnnl_dim_t *s = md->format_desc.blocking.strides; /* dims N, C, OH, OW */
  const bool u8 = md->data_type == dnnl_u8;
  /* Window position k = kh·KW + kw → its offset from the window's first cell, (kh·W + kw)·C. */
  int64_t table[256];
  if (u8) for (int64_t k = 0; k < 256; k++) table[k] = ((k / g->KW) * g->W + k % g->KW) * g->C;
  for (int64_t n = 0; n < g->N; n++) for (int64_t oh = 0; oh < g->OH; oh++) for (int64_t ow = 0; ow < g->OW; ow++) {
    const int64_t ih0 = oh * g->sh - g->pt, iw0 = ow * g->sw - g->pl, o = ((n * g->OH + oh) * g->OW + ow) * g->C;
    const int64_t first = ((n * g->H + ih0) * g->W + iw0) * g->C, base = n * s[0] + oh * s[2] + ow * s[3];
    int32_t *am = argmax + o;
    if (u8) {
      const uint8_t *w = (const uint8_t *)ws + base;
      for (int64_t c = 0; c < g->C; c++) am[c] = (int32_t)(first + c + table[w[c * s[1]]]);
    } else {
      const int32_t *w = (const int32_t *)ws + base;
      for (int64_t c = 0; c < g->C; c++) {
        const int64_t k = w[c * s[1]];
        am[c] = (int32_t)(first + c + ((k / g->KW) * g->W + k % g->KW) * g->C);
      }
    }
  }
}

/*
 * Max pooling forward in one pass, as the Backend's reference does it: each window clipped to the
 * image, the first cell taken, then every later cell that is strictly greater, in window order
 * (so a later NaN never takes over, as in the fused kernels of convpool.c); a window wholly in
 * the padding gives 0 and argmax −1. It reads x once and writes y and argmax once, where oneDNN's
 * primitive writes a workspace that a second pass turns into argmax: on a Zen 3 (jit:avx2) that
 * took 6–10 ms for mnist-small's first pool at batch 64, the reference's loop in wasm 1.5 ms.
 * Where the CPU has AVX2, maxPoolAvx2 below runs it.
 */
__attribute__((always_inline)) static inline void maxPoolBody(const Geom *g, const float *x, float *y, int32_t *argmax) {
  const int64_t C = g->C;
  for (int64_t n = 0, o = 0; n < g->N; n++) for (int64_t oh = 0; oh < g->OH; oh++) {
    const int64_t ih0 = oh * g->sh - g->pt, hLo = ih0 > 0 ? ih0 : 0, hHi = ih0 + g->KH < g->H ? ih0 + g->KH : g->H;
    for (int64_t ow = 0; ow < g->OW; ow++, o += C) {
      const int64_t iw0 = ow * g->sw - g->pl, wLo = iw0 > 0 ? iw0 : 0, wHi = iw0 + g->KW < g->W ? iw0 + g->KW : g->W;
      float *yo = y + o;
      int32_t *ao = argmax + o;
      if (hLo >= hHi || wLo >= wHi) {
        for (int64_t c = 0; c < C; c++) { yo[c] = 0.0f; ao[c] = -1; }
        continue;
      }
      const int64_t first = ((n * g->H + hLo) * g->W + wLo) * C;
      for (int64_t c = 0; c < C; c++) { yo[c] = x[first + c]; ao[c] = (int32_t)(first + c); }
      for (int64_t ih = hLo; ih < hHi; ih++) for (int64_t iw = ih == hLo ? wLo + 1 : wLo; iw < wHi; iw++) {
        const int64_t base = ((n * g->H + ih) * g->W + iw) * C;
        const float *xb = x + base;
        for (int64_t c = 0; c < C; c++) {
          const float v = xb[c], best = yo[c];
          const bool take = v > best;
          yo[c] = take ? v : best;
          ao[c] = take ? (int32_t)(base + c) : ao[c];
        }
      }
    }
  }
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

/*
 * The same with AVX2 intrinsics for channel counts that are whole vectors of 8: each window's
 * maximum and argmax stay in registers (the compiler kept the loop above scalar: y, argmax and x
 * may alias), 1.6 ms → a fifth of that for mnist-small's first pool. `v > best` is false for a NaN
 * on either side, so the first cell's NaN stays and a later one never takes over, as above.
 */
__attribute__((target("avx2"))) static void maxPoolAvx2(const Geom *g, const float *x, float *y, int32_t *argmax) {
  const int64_t C = g->C;
  if (C % 8 != 0) { maxPoolBody(g, x, y, argmax); return; }
  const __m256i iota = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  for (int64_t n = 0, o = 0; n < g->N; n++) for (int64_t oh = 0; oh < g->OH; oh++) {
    const int64_t ih0 = oh * g->sh - g->pt, hLo = ih0 > 0 ? ih0 : 0, hHi = ih0 + g->KH < g->H ? ih0 + g->KH : g->H;
    for (int64_t ow = 0; ow < g->OW; ow++, o += C) {
      const int64_t iw0 = ow * g->sw - g->pl, wLo = iw0 > 0 ? iw0 : 0, wHi = iw0 + g->KW < g->W ? iw0 + g->KW : g->W;
      if (hLo >= hHi || wLo >= wHi) {
        for (int64_t c = 0; c < C; c++) { y[o + c] = 0.0f; argmax[o + c] = -1; }
        continue;
      }
      for (int64_t c = 0; c < C; c += 8) {
        const int64_t first = ((n * g->H + hLo) * g->W + wLo) * C + c;
        __m256 best = _mm256_loadu_ps(x + first);
        __m256i at = _mm256_add_epi32(_mm256_set1_epi32((int32_t)first), iota);
        for (int64_t ih = hLo; ih < hHi; ih++) for (int64_t iw = ih == hLo ? wLo + 1 : wLo; iw < wHi; iw++) {
          const int64_t base = ((n * g->H + ih) * g->W + iw) * C + c;
          const __m256 v = _mm256_loadu_ps(x + base), take = _mm256_cmp_ps(v, best, _CMP_GT_OQ);
          best = _mm256_blendv_ps(best, v, take);
          at = _mm256_blendv_epi8(at, _mm256_add_epi32(_mm256_set1_epi32((int32_t)base), iota), _mm256_castps_si256(take));
        }
        _mm256_storeu_ps(y + o + c, best);
        _mm256_storeu_si256((__m256i *)(argmax + o + c), at);
      }
    }
  }
}
#endif

__attribute__((optimize("tree-vectorize"))) static void maxPoolPlain(const Geom *g, const float *x, float *y, int32_t *argmax) {
#if defined(__x86_64__) && defined(__GNUC__)
  if (__builtin_cpu_supports("avx2")) { maxPoolAvx2(g, x, y, argmax); return; }
#endif
  maxPoolBody(g, x, y, argmax);
}

static bool poolArgs(napi_env env, napi_callback_info info, size_t nArrays, napi_value *argv, const char *usage, const char *fn, Geom *g) {
  return getArgs(env, info, nArrays + 12, argv, usage) && getGeom(env, argv + nArrays, fn, false, g);
}

/* maxPoolForward(x, y, argmax, N, H, W, C, KH, KW, sh, sw, pt, pl, OH, OW) → done? */
napi_value MaxPoolForward(napi_env env, napi_callback_info info) {
  const char *fn = "maxPoolForward";
  napi_value argv[15];
  Geom g;
  if (!poolArgs(env, info, 3, argv, "maxPoolForward(x, y, argmax, N, H, W, C, KH, KW, sh, sw, pt, pl, OH, OW)", fn, &g)) return NULL;
  float *x, *y;
  int32_t *argmax;
  size_t lx, ly, la;
  if (!getF32(env, argv[0], fn, "x", false, &x, &lx) || !getF32(env, argv[1], fn, "y", false, &y, &ly) ||
      !getI32(env, argv[2], fn, "argmax", &argmax, &la)) return NULL;
  const int64_t out = g.N * g.OH * g.OW * g.C;
  if (!need(env, fn, "x", lx, g.N * g.H * g.W * g.C) || !need(env, fn, "y", ly, out) || !need(env, fn, "argmax", la, out)) return NULL;
  if (out == 0) return boolValue(env, true);
  Instance *inst = instance(env);
  if (!inst->noDirect && g.KH > 0 && g.KW > 0) {
    maxPoolPlain(&g, x, y, argmax);
    inst->direct[PLAN_POOL_MAX_FWD]++;
    return boolValue(env, true);
  }
  oneThread();
  Plan *p = g.KH > 0 && g.KW > 0 ? forwardPlan(inst, &g, true) : NULL;
  if (!p) { inst->unsupported[PLAN_POOL_MAX_FWD]++; return boolValue(env, false); }
  void *ptrs[] = { x, y };
  if (!planRun(env, inst, p, ptrs, fn)) return NULL;
  workspaceToArgmax(&g, p->mems[p->aux[0]], argmax);
  clearEmptyWindows(&g, y, argmax);
  return boolValue(env, true);
}

/* maxPoolBackward(dy, argmax, dx, N, H, W, C, KH, KW, sh, sw, pt, pl, OH, OW): dx = 0, then dx[argmax[i]] += dy[i]. */
napi_value MaxPoolBackward(napi_env env, napi_callback_info info) {
  const char *fn = "maxPoolBackward";
  napi_value argv[15];
  Geom g;
  if (!poolArgs(env, info, 3, argv, "maxPoolBackward(dy, argmax, dx, N, H, W, C, KH, KW, sh, sw, pt, pl, OH, OW)", fn, &g)) return NULL;
  float *dy, *dx;
  int32_t *argmax;
  size_t ldy, la, ldx;
  if (!getF32(env, argv[0], fn, "dy", false, &dy, &ldy) || !getI32(env, argv[1], fn, "argmax", &argmax, &la) ||
      !getF32(env, argv[2], fn, "dx", false, &dx, &ldx)) return NULL;
  const int64_t out = g.N * g.OH * g.OW * g.C, inp = g.N * g.H * g.W * g.C;
  if (!need(env, fn, "dy", ldy, out) || !need(env, fn, "argmax", la, out) || !need(env, fn, "dx", ldx, inp)) return NULL;
  Instance *inst = instance(env);
  const int64_t outside = !inst->noDirect && poolTiles(&g) ? maxPoolBackwardTiles(&g, dy, argmax, dx) : -1;
  if (outside == 0) { inst->direct[PLAN_POOL_MAX_BWD]++; return boolValue(env, true); }
  for (int64_t i = 0; i < out; i++) {
    if (argmax[i] >= inp) {
      napi_throw_range_error(env, NULL, "maxPoolBackward: argmax holds an index past the end of dx (not from maxPoolForward of this geometry?)");
      return NULL;
    }
  }
  if (outside > 0) {
    napi_throw_range_error(env, NULL, "maxPoolBackward: argmax holds an index outside its window (not from maxPoolForward of this geometry?)");
    return NULL;
  }
  memset(dx, 0, (size_t)inp * sizeof(float));
  for (int64_t i = 0; i < out; i++) if (argmax[i] >= 0) dx[argmax[i]] += dy[i];
  return boolValue(env, true);
}

/* avgPoolForward(x, y, N, H, W, C, KH, KW, sh, sw, pt, pl, OH, OW) → done? */
napi_value AvgPoolForward(napi_env env, napi_callback_info info) {
  const char *fn = "avgPoolForward";
  napi_value argv[14];
  Geom g;
  if (!poolArgs(env, info, 2, argv, "avgPoolForward(x, y, N, H, W, C, KH, KW, sh, sw, pt, pl, OH, OW)", fn, &g)) return NULL;
  float *x, *y;
  size_t lx, ly;
  if (!getF32(env, argv[0], fn, "x", false, &x, &lx) || !getF32(env, argv[1], fn, "y", false, &y, &ly)) return NULL;
  const int64_t out = g.N * g.OH * g.OW * g.C;
  if (!need(env, fn, "x", lx, g.N * g.H * g.W * g.C) || !need(env, fn, "y", ly, out)) return NULL;
  if (out == 0) return boolValue(env, true);
  oneThread();
  Instance *inst = instance(env);
  Plan *p = g.KH > 0 && g.KW > 0 ? forwardPlan(inst, &g, false) : NULL;
  if (!p) { inst->unsupported[PLAN_POOL_AVG_FWD]++; return boolValue(env, false); }
  void *ptrs[] = { x, y };
  if (!planRun(env, inst, p, ptrs, fn)) return NULL;
  clearEmptyWindows(&g, y, NULL);
  return boolValue(env, true);
}

/* avgPoolBackward(dy, dx, N, H, W, C, KH, KW, sh, sw, pt, pl, OH, OW) → done? dx overwritten. */
napi_value AvgPoolBackward(napi_env env, napi_callback_info info) {
  const char *fn = "avgPoolBackward";
  napi_value argv[14];
  Geom g;
  if (!poolArgs(env, info, 2, argv, "avgPoolBackward(dy, dx, N, H, W, C, KH, KW, sh, sw, pt, pl, OH, OW)", fn, &g)) return NULL;
  float *dy, *dx;
  size_t ldy, ldx;
  if (!getF32(env, argv[0], fn, "dy", false, &dy, &ldy) || !getF32(env, argv[1], fn, "dx", false, &dx, &ldx)) return NULL;
  const int64_t out = g.N * g.OH * g.OW * g.C, inp = g.N * g.H * g.W * g.C;
  if (!need(env, fn, "dy", ldy, out) || !need(env, fn, "dx", ldx, inp)) return NULL;
  if (inp == 0) return boolValue(env, true);
  if (out == 0) { memset(dx, 0, (size_t)inp * sizeof(float)); return boolValue(env, true); }
  oneThread();
  Instance *inst = instance(env);
  Plan *p = g.KH > 0 && g.KW > 0 ? avgBackwardPlan(inst, &g) : NULL;
  if (!p) { inst->unsupported[PLAN_POOL_AVG_BWD]++; return boolValue(env, false); }
  void *ptrs[] = { dy, dx };
  return planRun(env, inst, p, ptrs, fn) ? boolValue(env, true) : NULL;
}
