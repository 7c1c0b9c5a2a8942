/*
 * One direction of a recurrent layer over all its frames as one oneDNN primitive, forward training
 * and backward: what the recurrent layer runs instead of its per-step products and cells where this
 * is offered (src/nn/recurrentCell.ts). Two cells:
 * - LSTM: oneDNN's vanilla_lstm, gates i, f, g, o as PyTorch's;
 * - GRU: oneDNN's linear-before-reset GRU (lbr_gru), which is PyTorch's GRU (the reset gate
 *   multiplies W_hn·h + b_hn) with the gates in another order: oneDNN's u, r, o are PyTorch's z, r,
 *   n, and b_hn is a fourth bias block (u'), as the reset gate keeps it apart from b_in.
 *
 * The caller's arrays are PyTorch's parameters and gradients: W_ih [G·H, F], W_hh [G·H, H] (oneDNN's
 * `ldgoi`), b_ih, b_hh [G·H]. On every call the weights are reordered into the layouts the
 * primitives ask for (forward reads `ldigo`); for the GRU they are first copied with the gate blocks
 * in oneDNN's order. The bias oneDNN reads is made from b_ih and b_hh by the table of the cell. The
 * weight gradients come in oneDNN's layout, which the primitive accumulates into, so those buffers
 * are zeroed first and then added into the caller's dW by a reorder with a sum post-op (the GRU's
 * reordered to `ldgoi` and added gate by gate); the bias gradient is added into db_ih and db_hh by
 * the table.
 *
 * Memory is the layer's own, time-major as the layer keeps a direction (row t·N + n: frame t of
 * sample n), which is oneDNN's `tnc`: x [T·N, F], the hidden states h [T·N, H] (the layer's blocks
 * 1…T), dL/dh the same. The forward's workspace (what backward reads: gates and states) is the
 * caller's array, so two layers or directions of one shape share a plan, not a workspace.
 *
 * oneDNN's RNNs know no per-sample lengths: every sample runs all T steps. That is exact for the
 * valid frames and their gradients when the padding comes after each sample's end (a direction
 * that runs backwards gets its input reversed per sample, so it does) and dL/dh is 0 there: each
 * valid frame depends only on the frames before it, and the gradient flowing back from the padding
 * is 0. The states it computes at the padding mean nothing; the layer sets them to 0.
 *
 * On x86 without AVX-512 this is not offered (rnnWorkspaceSize returns 0): there the primitives
 * ran as fast as the tuned per-step path (packed.c, cells.c), LSTM 0.98–1.03×, GRU 1.00–1.01×, with
 * 3–3.4× the memory kept for backward (a Zen 4 under ONEDNN_MAX_CPU_ISA=AVX2, which the whole addon follows).
 */
#include <string.h>
#include "direct.h"

/* the caller's arrays, in the order of the calls' arguments */
enum { X = 0, WIH, WHH, BIH, BHH, HS, WS, DH, DX, DWIH, DWHH, DBIH, DBHH, SLOTS };

/* the plan's own memories the calls fill or read around the primitives (Plan.aux; -1 where unused) */
enum { OWN_BIAS = 0, OWN_WIH, OWN_WHH, OWN_DBIAS, OWN_DWL, OWN_DWI, OWN_DWIH, OWN_DWHH };

enum { CELL_LSTM = 0, CELL_GRU, CELL_KINDS };

typedef struct {
  const char *name;
  /** PyTorch's gate blocks (of W_ih, W_hh, b_ih, b_hh), oneDNN's bias blocks */
  int gates, biasGates;
  int fwd, bwd;
  /** oneDNN's gate block of PyTorch's block g: of W_ih, W_hh and b_ih (gate), of b_hh (hhBias) */
  const int *gate, *hhBias;
} Cell;

static const int SAME[] = { 0, 1, 2, 3 };
/* PyTorch r, z, n → oneDNN r (1), u (0), o (2); b_hn → u' (3) */
static const int GRU_GATE[] = { 1, 0, 2 }, GRU_HH_BIAS[] = { 1, 0, 3 };
static const Cell CELLS[CELL_KINDS] = {
  [CELL_LSTM] = { "LSTM", 4, 4, PLAN_LSTM_FWD, PLAN_LSTM_BWD, SAME, SAME },
  [CELL_GRU] = { "GRU", 3, 4, PLAN_GRU_FWD, PLAN_GRU_BWD, GRU_GATE, GRU_HH_BIAS },
};

/* True when the weights' gate blocks are in PyTorch's order (the caller's arrays are reordered directly). */
static bool samegates(const Cell *c) {
  for (int g = 0; g < c->gates; g++) if (c->gate[g] != g) return false;
  return true;
}

typedef struct { dnnl_memory_desc_t x, h, wih, whh, wihAny, whhAny, bias, state; } Descs;

static bool descs(const Cell *c, int64_t N, int64_t T, int64_t F, int64_t H, Descs *d) {
  const dnnl_dims_t xd = { T, N, F }, hd = { T, N, H }, wl = { 1, 1, F, c->gates, H }, wi = { 1, 1, H, c->gates, H };
  const dnnl_dims_t bd = { 1, 1, c->biasGates, H }, sd = { 1, 1, N, H };
  return dnnl_memory_desc_init_by_tag(&d->x, 3, xd, dnnl_f32, dnnl_tnc) == dnnl_success &&
         dnnl_memory_desc_init_by_tag(&d->state, 4, sd, dnnl_f32, dnnl_ldnc) == dnnl_success &&
         dnnl_memory_desc_init_by_tag(&d->h, 3, hd, dnnl_f32, dnnl_tnc) == dnnl_success &&
         dnnl_memory_desc_init_by_tag(&d->wih, 5, wl, dnnl_f32, dnnl_ldgoi) == dnnl_success &&
         dnnl_memory_desc_init_by_tag(&d->whh, 5, wi, dnnl_f32, dnnl_ldgoi) == dnnl_success &&
         dnnl_memory_desc_init_by_tag(&d->wihAny, 5, wl, dnnl_f32, dnnl_format_tag_any) == dnnl_success &&
         dnnl_memory_desc_init_by_tag(&d->whhAny, 5, wi, dnnl_f32, dnnl_format_tag_any) == dnnl_success &&
         dnnl_memory_desc_init_by_tag(&d->bias, 4, bd, dnnl_f32, dnnl_ldgo) == dnnl_success;
}

/* The primitive descriptor of the forward (training), or of the backward with the forward's as its hint; NULL when oneDNN has none. */
static dnnl_primitive_desc_t cellPd(Instance *inst, int cell, bool backward, Descs *d) {
  const dnnl_rnn_direction_t dir = dnnl_unidirectional_left2right;
  dnnl_rnn_desc_t fd;
  dnnl_primitive_desc_t pd = NULL;
  const dnnl_status_t s = cell == CELL_LSTM
    ? dnnl_lstm_forward_desc_init(&fd, dnnl_forward_training, dir, &d->x, &d->state, &d->state, &d->wihAny, &d->whhAny, &d->bias,
                                  &d->h, NULL, NULL, 0)
    : dnnl_lbr_gru_forward_desc_init(&fd, dnnl_forward_training, dir, &d->x, &d->state, &d->wihAny, &d->whhAny, &d->bias, &d->h,
                                     NULL, 0);
  if (s != dnnl_success || dnnl_primitive_desc_create(&pd, &fd, NULL, inst->engine, NULL) != dnnl_success) return NULL;
  if (!backward) return pd;
  dnnl_primitive_desc_t fpd = pd;
  dnnl_rnn_desc_t bd;
  const dnnl_status_t b = cell == CELL_LSTM
    ? dnnl_lstm_backward_desc_init(&bd, dnnl_backward, dir, &d->x, &d->state, &d->state, &d->wihAny, &d->whhAny, &d->bias, &d->h,
                                   NULL, NULL, &d->x, &d->state, &d->state, &d->wihAny, &d->whhAny, &d->bias, &d->h, NULL, NULL, 0)
    : dnnl_lbr_gru_backward_desc_init(&bd, dnnl_backward, dir, &d->x, &d->state, &d->wihAny, &d->whhAny, &d->bias, &d->h, NULL,
                                      &d->x, &d->state, &d->wihAny, &d->whhAny, &d->bias, &d->h, NULL, 0);
  if (b != dnnl_success || dnnl_primitive_desc_create(&pd, &bd, NULL, inst->engine, fpd) != dnnl_success) pd = NULL;
  dnnl_primitive_desc_destroy(fpd);
  return pd;
}

/* A reorder step from memory `from` (md `src`) to memory `to` (md `dst`), accumulating when asked; false on failure. */
static bool reorderStep(Instance *inst, Plan *p, const dnnl_memory_desc_t *src, int from, const dnnl_memory_desc_t *dst, int to,
                        bool accumulate) {
  if (from < 0 || to < 0) return false;
  dnnl_primitive_desc_t r = reorderPd(inst, src, dst, accumulate);
  if (!r) return false;
  const ArgRef args[] = { { DNNL_ARG_FROM, from }, { DNNL_ARG_TO, to } };
  const bool ok = planStep(p, r, 2, args);
  dnnl_primitive_desc_destroy(r);
  return ok;
}

/*
 * The zero initial state (h, and c of an LSTM), passed explicitly: given none, oneDNN 2.6's LSTM
 * backward took an uninitialised one for the first step's dW_hh (nonzero at T = 1, where it is 0;
 * bench/onednn-probes/lstm-primitive.c). Owned by the plan, zeroed once. -1 on failure.
 */
static int zeroState(Instance *inst, Plan *p, const dnnl_memory_desc_t *state) {
  const int m = planMem(inst, p, state, -1);
  void *data = NULL;
  if (m < 0 || dnnl_memory_get_data_handle(p->mems[m], &data) != dnnl_success || !data) return -1;
  memset(data, 0, dnnl_memory_desc_get_size(state));
  return m;
}

/*
 * The plan of a direction's forward (training) or backward: the weights reordered from the caller's
 * layout (or from the plan's copy with the gates in oneDNN's order), then the primitive; the
 * backward then adds its weight gradients into the caller's (or into the plan's `ldgoi` copy).
 */
static Plan *rnnPlan(Instance *inst, int cell, bool backward, int64_t N, int64_t T, int64_t F, int64_t H) {
  const Cell *c = &CELLS[cell];
  const int kind = backward ? c->bwd : c->fwd;
  const Key key = { { kind, N, T, F, H } };
  Plan *p = planFind(inst, &key);
  if (p) return p;
  Descs d;
  dnnl_primitive_desc_t pd = descs(c, N, T, F, H, &d) ? cellPd(inst, cell, backward, &d) : NULL;
  if (!pd) return NULL;
  p = planNew(inst, &key);
  const bool direct = samegates(c);
  const dnnl_memory_desc_t *ws = dnnl_primitive_desc_query_md(pd, dnnl_query_workspace_md, 0);
  const dnnl_memory_desc_t *wl = dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
  const dnnl_memory_desc_t *wi = dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 1);
  const dnnl_memory_desc_t *dwl = backward ? dnnl_primitive_desc_query_md(pd, dnnl_query_diff_weights_md, 0) : NULL;
  const dnnl_memory_desc_t *dwi = backward ? dnnl_primitive_desc_query_md(pd, dnnl_query_diff_weights_md, 1) : NULL;
  bool ok = ws && wl && wi && (!backward || (dwl && dwi));
  /* the weights: the caller's arrays (or the plan's copies in oneDNN's gate order) reordered for the primitive */
  const int mWl = ok ? planMem(inst, p, wl, -1) : -1, mWi = ok ? planMem(inst, p, wi, -1) : -1;
  p->aux[OWN_WIH] = ok ? planMem(inst, p, &d.wih, direct ? WIH : -1) : -1;
  p->aux[OWN_WHH] = ok ? planMem(inst, p, &d.whh, direct ? WHH : -1) : -1;
  ok = ok && reorderStep(inst, p, &d.wih, p->aux[OWN_WIH], wl, mWl, false) && reorderStep(inst, p, &d.whh, p->aux[OWN_WHH], wi, mWi, false);
  if (direct) p->aux[OWN_WIH] = p->aux[OWN_WHH] = -1;
  p->aux[OWN_BIAS] = ok ? planMem(inst, p, &d.bias, -1) : -1;
  const int zero = ok ? zeroState(inst, p, &d.state) : -1;
  if (ok) {
    ArgRef args[MAX_ARGS] = { { DNNL_ARG_SRC_LAYER, planMem(inst, p, &d.x, X) }, { DNNL_ARG_WEIGHTS_LAYER, mWl },
                              { DNNL_ARG_WEIGHTS_ITER, mWi }, { DNNL_ARG_BIAS, p->aux[OWN_BIAS] },
                              { DNNL_ARG_DST_LAYER, planMem(inst, p, &d.h, HS) }, { DNNL_ARG_WORKSPACE, planMem(inst, p, ws, WS) },
                              { DNNL_ARG_SRC_ITER, zero } };
    int n = 7;
    if (cell == CELL_LSTM) args[n++] = (ArgRef){ DNNL_ARG_SRC_ITER_C, zero };
    if (backward) {
      /* the gradients in oneDNN's layout, owned: zeroed before each call (the primitive adds into them) */
      p->aux[OWN_DWL] = planMem(inst, p, dwl, -1);
      p->aux[OWN_DWI] = planMem(inst, p, dwi, -1);
      p->aux[OWN_DBIAS] = planMem(inst, p, &d.bias, -1);
      const ArgRef more[] = { { DNNL_ARG_DIFF_DST_LAYER, planMem(inst, p, &d.h, DH) }, { DNNL_ARG_DIFF_SRC_LAYER, planMem(inst, p, &d.x, DX) },
                              { DNNL_ARG_DIFF_WEIGHTS_LAYER, p->aux[OWN_DWL] }, { DNNL_ARG_DIFF_WEIGHTS_ITER, p->aux[OWN_DWI] },
                              { DNNL_ARG_DIFF_BIAS, p->aux[OWN_DBIAS] }, { DNNL_ARG_DIFF_SRC_ITER, planMem(inst, p, &d.state, -1) } };
      memcpy(args + n, more, sizeof more);
      n += (int)(sizeof more / sizeof *more);
      if (cell == CELL_LSTM) args[n++] = (ArgRef){ DNNL_ARG_DIFF_SRC_ITER_C, planMem(inst, p, &d.state, -1) };
    }
    ok = planStep(p, pd, n, args);
  }
  if (backward && ok) {
    /* added into the caller's dW_ih, dW_hh; or, gates to reorder, into the plan's ldgoi copies the call adds from */
    const int to[2] = { planMem(inst, p, &d.wih, direct ? DWIH : -1), planMem(inst, p, &d.whh, direct ? DWHH : -1) };
    ok = reorderStep(inst, p, dwl, p->aux[OWN_DWL], &d.wih, to[0], direct) && reorderStep(inst, p, dwi, p->aux[OWN_DWI], &d.whh, to[1], direct);
    p->aux[OWN_DWIH] = direct ? -1 : to[0];
    p->aux[OWN_DWHH] = direct ? -1 : to[1];
  }
  if (ok) planCreated(inst, p, kind, pd);
  else { planFree(p); p = NULL; }
  dnnl_primitive_desc_destroy(pd);
  return p;
}

static bool offered(void) {
#ifdef X86
  return hasAvx512();
#else
  return true;
#endif
}

/* cell, N, T, F, H from the first five arguments; false after throwing. */
static bool getSizes(napi_env env, napi_value *argv, const char *fn, int64_t *s) {
  static const char *const names[] = { "cell", "N", "T", "F", "H" };
  if (!getInts(env, argv, 5, fn, names, s)) return false;
  if (s[0] < CELL_KINDS) return true;
  char msg[120];
  snprintf(msg, sizeof msg, "%s: cell must be 0 (LSTM) or 1 (GRU), got %lld", fn, (long long)s[0]);
  napi_throw_range_error(env, NULL, msg);
  return false;
}

static void *memData(const Plan *p, int m) {
  void *data = NULL;
  dnnl_memory_get_data_handle(p->mems[m], &data);
  return data;
}

static size_t memBytes(const Plan *p, int m) {
  const dnnl_memory_desc_t *md = NULL;
  dnnl_memory_get_memory_desc(p->mems[m], &md);
  return dnnl_memory_desc_get_size(md);
}

/* The floats of a plan's workspace (the caller's array in slot WS). */
static int64_t workspaceFloats(const Plan *p) {
  for (int i = 0; i < p->nmems; i++) if (p->slot[i] == WS) return (int64_t)((memBytes(p, i) + sizeof(float) - 1) / sizeof(float));
  return 0;
}

/* rnnWorkspaceSize(cell, N, T, F, H) → floats of the forward's workspace for this shape; 0 when not offered (the layer runs its steps). */
napi_value RnnWorkspaceSize(napi_env env, napi_callback_info info) {
  napi_value argv[5];
  if (!getArgs(env, info, 5, argv, "rnnWorkspaceSize(cell, N, T, F, H)")) return NULL;
  int64_t s[5];
  if (!getSizes(env, argv, "rnnWorkspaceSize", s)) return NULL;
  const Cell *c = &CELLS[s[0]];
  if (!offered() || s[1] == 0 || s[2] == 0 || s[3] == 0 || s[4] == 0) return numberValue(env, 0);
  oneThread();
  Instance *inst = instance(env);
  /* both plans made now, so a forward that ran is never left without its backward */
  if (!rnnPlan(inst, (int)s[0], true, s[1], s[2], s[3], s[4])) { inst->unsupported[c->bwd]++; return numberValue(env, 0); }
  const Plan *p = rnnPlan(inst, (int)s[0], false, s[1], s[2], s[3], s[4]);
  if (!p) { inst->unsupported[c->fwd]++; return numberValue(env, 0); }
  return numberValue(env, (double)workspaceFloats(p));
}

/* Before the primitives: oneDNN's bias from b_ih and b_hh, the weights in oneDNN's gate order (GRU), the gradients' buffers zeroed. */
static void prepare(const Cell *c, const Plan *p, bool backward, int64_t F, int64_t H, float *const *a) {
  float *bias = memData(p, p->aux[OWN_BIAS]);
  memset(bias, 0, (size_t)(c->biasGates * H) * sizeof(float));
  for (int g = 0; g < c->gates; g++) {
    for (int64_t j = 0; j < H; j++) {
      bias[c->gate[g] * H + j] += a[BIH][g * H + j];
      bias[c->hhBias[g] * H + j] += a[BHH][g * H + j];
    }
  }
  if (p->aux[OWN_WIH] >= 0) {
    float *wih = memData(p, p->aux[OWN_WIH]), *whh = memData(p, p->aux[OWN_WHH]);
    for (int g = 0; g < c->gates; g++) {
      memcpy(wih + c->gate[g] * H * F, a[WIH] + g * H * F, (size_t)(H * F) * sizeof(float));
      memcpy(whh + c->gate[g] * H * H, a[WHH] + g * H * H, (size_t)(H * H) * sizeof(float));
    }
  }
  if (!backward) return;
  const int zeroed[] = { OWN_DWL, OWN_DWI, OWN_DBIAS };
  for (int i = 0; i < 3; i++) memset(memData(p, p->aux[zeroed[i]]), 0, memBytes(p, p->aux[zeroed[i]]));
}

/* dst's gate block g += src's block gate[g], for `gates` blocks of `size` floats. */
static void addGates(const int *gate, int gates, int64_t size, const float *src, float *dst) {
  for (int g = 0; g < gates; g++) {
    const float *s = src + gate[g] * size;
    float *d = dst + g * size;
    for (int64_t i = 0; i < size; i++) d[i] += s[i];
  }
}

/* After the backward's primitives: the bias gradient into db_ih and db_hh, the GRU's weight gradients into dW_ih, dW_hh. */
static void finish(const Cell *c, const Plan *p, int64_t F, int64_t H, float *const *a) {
  const float *db = memData(p, p->aux[OWN_DBIAS]);
  addGates(c->gate, c->gates, H, db, a[DBIH]);
  addGates(c->hhBias, c->gates, H, db, a[DBHH]);
  if (p->aux[OWN_DWIH] < 0) return;
  addGates(c->gate, c->gates, H * F, memData(p, p->aux[OWN_DWIH]), a[DWIH]);
  addGates(c->gate, c->gates, H * H, memData(p, p->aux[OWN_DWHH]), a[DWHH]);
}

/*
 * rnnForward(cell, N, T, F, H, x, wih, whh, bih, bhh, h, workspace) → done? h [T·N, H] from x [T·N, F]
 * (time-major), the workspace kept for rnnBackward.
 * rnnBackward(cell, N, T, F, H, x, wih, whh, bih, bhh, h, workspace, dh, dx, dwih, dwhh, dbih, dbhh) →
 * done? After rnnForward of the same arrays: dx [T·N, F] written, dwih, dwhh, dbih, dbhh += (dh
 * [T·N, H]: dL/dh of each frame's output). The arrays come in the order of the slots.
 */
static napi_value rnnCall(napi_env env, napi_callback_info info, bool backward) {
  const char *fn = backward ? "rnnBackward" : "rnnForward";
  const int arrays = backward ? SLOTS : DH;
  napi_value argv[5 + SLOTS];
  if (!getArgs(env, info, (size_t)(5 + arrays), argv,
               backward ? "rnnBackward(cell, N, T, F, H, x, wih, whh, bih, bhh, h, workspace, dh, dx, dwih, dwhh, dbih, dbhh)"
                        : "rnnForward(cell, N, T, F, H, x, wih, whh, bih, bhh, h, workspace)")) return NULL;
  int64_t s[5];
  if (!getSizes(env, argv, fn, s)) return NULL;
  const Cell *c = &CELLS[s[0]];
  const int64_t N = s[1], T = s[2], F = s[3], H = s[4], G = c->gates;
  if (!offered() || !N || !T || !F || !H) return boolValue(env, false);
  oneThread();
  Instance *inst = instance(env);
  Plan *p = rnnPlan(inst, (int)s[0], backward, N, T, F, H);
  if (!p) { inst->unsupported[backward ? c->bwd : c->fwd]++; return boolValue(env, false); }
  static const char *const names[SLOTS] = { "x", "wih", "whh", "bih", "bhh", "h", "workspace", "dh", "dx", "dwih", "dwhh", "dbih", "dbhh" };
  const int64_t want[SLOTS] = { T * N * F, G * H * F, G * H * H, G * H, G * H, T * N * H, workspaceFloats(p), T * N * H, T * N * F,
                                G * H * F, G * H * H, G * H, G * H };
  float *a[SLOTS] = { 0 };
  for (int i = 0; i < arrays; i++) {
    size_t len;
    if (!getF32(env, argv[5 + i], fn, names[i], false, &a[i], &len) || !need(env, fn, names[i], len, want[i])) return NULL;
  }
  prepare(c, p, backward, F, H, a);
  if (!planRun(env, inst, p, (void *const *)a, fn)) return NULL;
  if (backward) finish(c, p, F, H, a);
  return boolValue(env, true);
}

napi_value RnnForward(napi_env env, napi_callback_info info) {
  return rnnCall(env, info, false);
}

napi_value RnnBackward(napi_env env, napi_callback_info info) {
  return rnnCall(env, info, true);
}
