/*
 * 2-D convolutions as oneDNN primitives on the caller's NHWC memory: forward, backward-data and
 * backward-weights, no im2col here. Activations are described as `nhwc` (the caller's layout,
 * used in place); the filter [KH, KW, C, F] is oneDNN's `hwio`. The primitives are asked for
 * weights in the format of their choice (`any`): with plain `hwio` weights oneDNN 2.6 only offers
 * its gemm-based (im2col) implementation, while a blocked format gets its direct JIT kernels
 * (brgconv / jit:avx512_core, jit:avx2 …). So a plan reorders the filter into that format before
 * the forward and backward-data primitives (a few KB per call), and backward-weights writes the
 * filter gradient in its own format and a reorder with a sum post-op ADDS it into the caller's dw
 * (the Backend contract accumulates dw and db), likewise for db.
 *
 * Padding after the image is implied by OH/OW (Geom.pb/pr) and may be negative (the last rows or
 * columns unused), which oneDNN accepts. When oneDNN has no primitive for a geometry the call
 * returns false and the TypeScript side runs the base backend's kernel instead. Convolutions with
 * few input channels run direct.c's kernels instead (oneDNN's are slow there), where the CPU has
 * AVX-512; without AVX-512, filter gradients of windows of 64 values or more run as im2col +
 * dnnl_sgemm (gemmconv.c: twice the AVX2 primitive's speed).
 */
#include <string.h>
#include "onednn.h"

typedef struct {
  dnnl_memory_desc_t src, wUser, wAny, dst, bias;
  dnnl_dims_t strides, padL, padR;
} ConvMds;

static bool convMds(const Geom *g, ConvMds *m) {
  const dnnl_dims_t sd = { g->N, g->C, g->H, g->W }, wd = { g->F, g->C, g->KH, g->KW };
  const dnnl_dims_t dd = { g->N, g->F, g->OH, g->OW }, bd = { g->F };
  m->strides[0] = g->sh; m->strides[1] = g->sw;
  m->padL[0] = g->pt; m->padL[1] = g->pl;
  m->padR[0] = g->pb; m->padR[1] = g->pr;
  return dnnl_memory_desc_init_by_tag(&m->src, 4, sd, dnnl_f32, dnnl_nhwc) == dnnl_success &&
         dnnl_memory_desc_init_by_tag(&m->wUser, 4, wd, dnnl_f32, dnnl_hwio) == dnnl_success &&
         dnnl_memory_desc_init_by_tag(&m->wAny, 4, wd, dnnl_f32, dnnl_format_tag_any) == dnnl_success &&
         dnnl_memory_desc_init_by_tag(&m->dst, 4, dd, dnnl_f32, dnnl_nhwc) == dnnl_success &&
         dnnl_memory_desc_init_by_tag(&m->bias, 1, bd, dnnl_f32, dnnl_a) == dnnl_success;
}

static Key convKey(int kind, const Geom *g, bool bias) {
  return (Key){ { kind, g->N, g->H, g->W, g->C, g->KH, g->KW, g->F, g->sh, g->sw, g->pt, g->pl, g->OH, g->OW, bias } };
}

/* The forward's key also holds its activation and cap. */
static Key forwardKey(const Geom *g, bool bias, int act, float cap) {
  Key key = convKey(PLAN_CONV_FWD, g, bias);
  key.v[15] = act;
  if (act == ACT_CLIPPED_RELU) memcpy((char *)&key.v[15] + 4, &cap, sizeof cap);
  return key;
}

/* The forward primitive, with activation `act` (ACT_* of onednn.h) as an eltwise post-op unless ACT_NONE. */
static dnnl_primitive_desc_t forwardPd(Instance *inst, ConvMds *m, bool bias, int act, float cap) {
  dnnl_convolution_desc_t d;
  dnnl_primitive_desc_t pd = NULL;
  dnnl_primitive_attr_t attr = NULL;
  dnnl_post_ops_t ops = NULL;
  bool ok = dnnl_convolution_forward_desc_init(&d, dnnl_forward_training, dnnl_convolution_direct, &m->src, &m->wAny,
              bias ? &m->bias : NULL, &m->dst, m->strides, m->padL, m->padR) == dnnl_success;
  if (ok && act != ACT_NONE) {
    const dnnl_alg_kind_t alg = act == ACT_RELU ? dnnl_eltwise_relu : dnnl_eltwise_clip_v2;
    ok = dnnl_primitive_attr_create(&attr) == dnnl_success && dnnl_post_ops_create(&ops) == dnnl_success &&
         dnnl_post_ops_append_eltwise(ops, 1.0f, alg, 0.0f, act == ACT_RELU ? 0.0f : cap) == dnnl_success &&
         dnnl_primitive_attr_set_post_ops(attr, ops) == dnnl_success;
  }
  if (ok && dnnl_primitive_desc_create(&pd, &d, attr, inst->engine, NULL) != dnnl_success) pd = NULL;
  if (ops) dnnl_post_ops_destroy(ops);
  if (attr) dnnl_primitive_attr_destroy(attr);
  return pd;
}

/* The weights the primitive reads: the caller's (slot) when the formats agree, else a reorder into its own buffer. */
static int weightsIn(Instance *inst, Plan *p, ConvMds *m, const dnnl_memory_desc_t *want, int slot) {
  const int user = planMem(inst, p, &m->wUser, slot);
  if (user < 0 || dnnl_memory_desc_equal(want, &m->wUser)) return user;
  const int own = planMem(inst, p, want, -1);
  dnnl_primitive_desc_t r = reorderPd(inst, &m->wUser, want, false);
  const ArgRef args[] = { { DNNL_ARG_FROM, user }, { DNNL_ARG_TO, own } };
  const bool ok = r && planStep(p, r, 2, args);
  if (r) dnnl_primitive_desc_destroy(r);
  return ok ? own : -1;
}

/* Slots: 0 x, 1 w, 2 bias, 3 y. */
static Plan *forwardPlan(Instance *inst, const Geom *g, bool bias, int act, float cap) {
  const Key key = forwardKey(g, bias, act, cap);
  Plan *p = planFind(inst, &key);
  if (p) return p;
  p = planNew(inst, &key);
  ConvMds m;
  dnnl_primitive_desc_t pd = convMds(g, &m) ? forwardPd(inst, &m, bias, act, cap) : NULL;
  bool ok = pd != NULL;
  if (ok) {
    const int w = weightsIn(inst, p, &m, dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0), 1);
    const int x = planMem(inst, p, &m.src, 0), y = planMem(inst, p, &m.dst, 3);
    const int b = bias ? planMem(inst, p, &m.bias, 2) : 0;
    const ArgRef args[] = { { DNNL_ARG_SRC, x }, { DNNL_ARG_WEIGHTS, w }, { DNNL_ARG_DST, y }, { DNNL_ARG_BIAS, b } };
    ok = planStep(p, pd, bias ? 4 : 3, args);
  }
  if (ok) planCreated(inst, p, PLAN_CONV_FWD, pd);
  else { planFree(p); p = NULL; }
  if (pd) dnnl_primitive_desc_destroy(pd);
  return p;
}

/* Slots: 0 dy, 1 w, 2 dx. */
static Plan *backwardDataPlan(Instance *inst, const Geom *g) {
  const Key key = convKey(PLAN_CONV_BWD_DATA, g, false);
  Plan *p = planFind(inst, &key);
  if (p) return p;
  p = planNew(inst, &key);
  ConvMds m;
  dnnl_primitive_desc_t hint = convMds(g, &m) ? forwardPd(inst, &m, false, ACT_NONE, 0) : NULL, pd = NULL;
  dnnl_convolution_desc_t d;
  bool ok = hint &&
    dnnl_convolution_backward_data_desc_init(&d, dnnl_convolution_direct, &m.src, &m.wAny, &m.dst, m.strides, m.padL, m.padR) == dnnl_success &&
    dnnl_primitive_desc_create(&pd, &d, NULL, inst->engine, hint) == dnnl_success;
  if (ok) {
    const int w = weightsIn(inst, p, &m, dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0), 1);
    const int dy = planMem(inst, p, &m.dst, 0), dx = planMem(inst, p, &m.src, 2);
    const ArgRef args[] = { { DNNL_ARG_DIFF_DST, dy }, { DNNL_ARG_WEIGHTS, w }, { DNNL_ARG_DIFF_SRC, dx } };
    ok = planStep(p, pd, 3, args);
  }
  if (ok) planCreated(inst, p, PLAN_CONV_BWD_DATA, pd);
  else { planFree(p); p = NULL; }
  if (pd) dnnl_primitive_desc_destroy(pd);
  if (hint) dnnl_primitive_desc_destroy(hint);
  return p;
}

/* Adds a reorder-with-sum step from the plan's own `from` into the caller's `slot` (described by `md`). */
static bool accumulateInto(Instance *inst, Plan *p, int from, const dnnl_memory_desc_t *fromMd, const dnnl_memory_desc_t *md, int slot) {
  const int to = planMem(inst, p, md, slot);
  dnnl_primitive_desc_t r = to >= 0 ? reorderPd(inst, fromMd, md, true) : NULL;
  const ArgRef args[] = { { DNNL_ARG_FROM, from }, { DNNL_ARG_TO, to } };
  const bool ok = r && planStep(p, r, 2, args);
  if (r) dnnl_primitive_desc_destroy(r);
  return ok;
}

/* Slots: 0 x, 1 dy, 2 dw, 3 db. */
static Plan *backwardWeightsPlan(Instance *inst, const Geom *g, bool bias) {
  const Key key = convKey(PLAN_CONV_BWD_WEIGHTS, g, bias);
  Plan *p = planFind(inst, &key);
  if (p) return p;
  p = planNew(inst, &key);
  ConvMds m;
  dnnl_primitive_desc_t hint = convMds(g, &m) ? forwardPd(inst, &m, bias, ACT_NONE, 0) : NULL, pd = NULL;
  dnnl_convolution_desc_t d;
  bool ok = hint &&
    dnnl_convolution_backward_weights_desc_init(&d, dnnl_convolution_direct, &m.src, &m.wAny, bias ? &m.bias : NULL, &m.dst,
                                                 m.strides, m.padL, m.padR) == dnnl_success &&
    dnnl_primitive_desc_create(&pd, &d, NULL, inst->engine, hint) == dnnl_success;
  if (ok) {
    const dnnl_memory_desc_t *dwMd = dnnl_primitive_desc_query_md(pd, dnnl_query_diff_weights_md, 0);
    const int x = planMem(inst, p, &m.src, 0), dy = planMem(inst, p, &m.dst, 1), dw = planMem(inst, p, dwMd, -1);
    const int db = bias ? planMem(inst, p, &m.bias, -1) : 0;
    const ArgRef args[] = { { DNNL_ARG_SRC, x }, { DNNL_ARG_DIFF_DST, dy }, { DNNL_ARG_DIFF_WEIGHTS, dw }, { DNNL_ARG_DIFF_BIAS, db } };
    ok = planStep(p, pd, bias ? 4 : 3, args) && accumulateInto(inst, p, dw, dwMd, &m.wUser, 2) &&
         (!bias || accumulateInto(inst, p, db, &m.bias, &m.bias, 3));
  }
  if (ok) planCreated(inst, p, PLAN_CONV_BWD_WEIGHTS, pd);
  else { planFree(p); p = NULL; }
  if (pd) dnnl_primitive_desc_destroy(pd);
  if (hint) dnnl_primitive_desc_destroy(hint);
  return p;
}

static void sumRows(const float *dy, int64_t rows, int64_t F, float *db) {
  for (int64_t f = 0; f < F; f++) {
    double s = 0;
    for (int64_t r = 0; r < rows; r++) s += dy[r * F + f];
    db[f] = (float)(db[f] + s);
  }
}

/*
 * conv2dForward(x, w, bias | null, y, N, H, W, C, KH, KW, F, sh, sw, pt, pl, OH, OW, act, cap) → done?
 * act: ACT_RELU or ACT_CLIPPED_RELU (to [0, cap]) applied to y in the same pass, or ACT_NONE.
 */
napi_value Conv2dForward(napi_env env, napi_callback_info info) {
  const char *fn = "conv2dForward";
  napi_value argv[19];
  if (!getArgs(env, info, 19, argv, "conv2dForward(x, w, bias, y, N, H, W, C, KH, KW, F, sh, sw, pt, pl, OH, OW, act, cap)")) return NULL;
  Geom g;
  if (!getGeom(env, argv + 4, fn, true, &g)) return NULL;
  static const char *const actName[] = { "activation code" };
  int64_t act;
  double cap;
  if (!getInts(env, argv + 17, 1, fn, actName, &act) || !getNumber(env, argv[18], fn, "cap", &cap)) return NULL;
  if (act != ACT_RELU && act != ACT_CLIPPED_RELU && act != ACT_NONE) {
    napi_throw_range_error(env, NULL, "conv2dForward: the activation code must be 0 (relu), 1 (clippedRelu) or 4 (none)");
    return NULL;
  }
  float *x, *w, *bias, *y;
  size_t lx, lw, lb, ly;
  if (!getF32(env, argv[0], fn, "x", false, &x, &lx) || !getF32(env, argv[1], fn, "w", false, &w, &lw) ||
      !getF32(env, argv[2], fn, "bias", true, &bias, &lb) || !getF32(env, argv[3], fn, "y", false, &y, &ly)) return NULL;
  const int64_t K = g.KH * g.KW * g.C, total = g.N * g.OH * g.OW;
  if (!need(env, fn, "x", lx, g.N * g.H * g.W * g.C) || !need(env, fn, "w", lw, K * g.F) ||
      !need(env, fn, "y", ly, total * g.F) || (bias && !need(env, fn, "bias", lb, g.F))) return NULL;
  if (total == 0 || g.F == 0) return boolValue(env, true);
  if (K == 0) {
    /* An empty window: y is the bias (or 0), activated. */
    if (act != ACT_NONE) return boolValue(env, false);
    for (int64_t r = 0; r < total; r++) {
      if (bias) memcpy(y + r * g.F, bias, (size_t)g.F * sizeof(float));
      else memset(y + r * g.F, 0, (size_t)g.F * sizeof(float));
    }
    return boolValue(env, true);
  }
  oneThread();
  Instance *inst = instance(env);
  if (!inst->noDirect && smallConv(&g)) {
    smallConvForward(&g, x, w, bias, y, (int)act, (float)cap);
    inst->direct[PLAN_CONV_FWD]++;
    return boolValue(env, true);
  }
  Plan *p = forwardPlan(inst, &g, bias != NULL, (int)act, (float)cap);
  if (!p) { inst->unsupported[PLAN_CONV_FWD]++; return boolValue(env, false); }
  void *ptrs[] = { x, w, bias, y };
  return planRun(env, inst, p, ptrs, fn) ? boolValue(env, true) : NULL;
}

/* conv2dBackwardData(dy, w, dx, N, H, W, C, KH, KW, F, sh, sw, pt, pl, OH, OW) → done? dx overwritten. */
napi_value Conv2dBackwardData(napi_env env, napi_callback_info info) {
  const char *fn = "conv2dBackwardData";
  napi_value argv[16];
  if (!getArgs(env, info, 16, argv, "conv2dBackwardData(dy, w, dx, N, H, W, C, KH, KW, F, sh, sw, pt, pl, OH, OW)")) return NULL;
  Geom g;
  if (!getGeom(env, argv + 3, fn, true, &g)) return NULL;
  float *dy, *w, *dx;
  size_t ldy, lw, ldx;
  if (!getF32(env, argv[0], fn, "dy", false, &dy, &ldy) || !getF32(env, argv[1], fn, "w", false, &w, &lw) ||
      !getF32(env, argv[2], fn, "dx", false, &dx, &ldx)) return NULL;
  const int64_t K = g.KH * g.KW * g.C, total = g.N * g.OH * g.OW, xLen = g.N * g.H * g.W * g.C;
  if (!need(env, fn, "dy", ldy, total * g.F) || !need(env, fn, "w", lw, K * g.F) || !need(env, fn, "dx", ldx, xLen)) return NULL;
  if (xLen == 0) return boolValue(env, true);
  if (total == 0 || K == 0 || g.F == 0) { memset(dx, 0, (size_t)xLen * sizeof(float)); return boolValue(env, true); }
  oneThread();
  Instance *inst = instance(env);
  if (!inst->noDirect && smallConv(&g) && smallConvBackwardData(&g, dy, w, dx)) {
    inst->direct[PLAN_CONV_BWD_DATA]++;
    return boolValue(env, true);
  }
  Plan *p = backwardDataPlan(inst, &g);
  if (!p) { inst->unsupported[PLAN_CONV_BWD_DATA]++; return boolValue(env, false); }
  void *ptrs[] = { dy, w, dx };
  return planRun(env, inst, p, ptrs, fn) ? boolValue(env, true) : NULL;
}

/* conv2dBackwardFilter(x, dy, dw, db | null, N, H, W, C, KH, KW, F, sh, sw, pt, pl, OH, OW) → done? dw, db += */
napi_value Conv2dBackwardFilter(napi_env env, napi_callback_info info) {
  const char *fn = "conv2dBackwardFilter";
  napi_value argv[17];
  if (!getArgs(env, info, 17, argv, "conv2dBackwardFilter(x, dy, dw, db, N, H, W, C, KH, KW, F, sh, sw, pt, pl, OH, OW)")) return NULL;
  Geom g;
  if (!getGeom(env, argv + 4, fn, true, &g)) return NULL;
  float *x, *dy, *dw, *db;
  size_t lx, ldy, ldw, ldb;
  if (!getF32(env, argv[0], fn, "x", false, &x, &lx) || !getF32(env, argv[1], fn, "dy", false, &dy, &ldy) ||
      !getF32(env, argv[2], fn, "dw", false, &dw, &ldw) || !getF32(env, argv[3], fn, "db", true, &db, &ldb)) return NULL;
  const int64_t K = g.KH * g.KW * g.C, total = g.N * g.OH * g.OW;
  if (!need(env, fn, "x", lx, g.N * g.H * g.W * g.C) || !need(env, fn, "dy", ldy, total * g.F) ||
      !need(env, fn, "dw", ldw, K * g.F) || (db && !need(env, fn, "db", ldb, g.F))) return NULL;
  if (total == 0 || g.F == 0) return boolValue(env, true);
  if (K == 0) {
    if (db) sumRows(dy, total, g.F, db);
    return boolValue(env, true);
  }
  oneThread();
  Instance *inst = instance(env);
  if (!inst->noDirect && ((smallConv(&g) && smallConvBackwardFilter(&g, x, dy, dw, db)) ||
                          (gemmFilterGradient(&g) && gemmConvBackwardFilter(&g, x, dy, dw, db)))) {
    inst->direct[PLAN_CONV_BWD_WEIGHTS]++;
    return boolValue(env, true);
  }
  Plan *p = backwardWeightsPlan(inst, &g, db != NULL);
  if (!p) { inst->unsupported[PLAN_CONV_BWD_WEIGHTS]++; return boolValue(env, false); }
  void *ptrs[] = { x, dy, dw, db };
  return planRun(env, inst, p, ptrs, fn) ? boolValue(env, true) : NULL;
}
