/*
 * One direction of an LSTM over all its frames as oneDNN's LSTM primitive (vanilla_lstm, gates
 * i, f, g, o as PyTorch's), forward training and backward: what the recurrent layer runs instead
 * of its per-step products and cells where this is offered (src/nn/lstmCell.ts).
 *
 * Memory is the layer's own, time-major as the layer keeps a direction (row t·N + n: frame t of
 * sample n), which is oneDNN's `tnc`: x [T·N, F], the hidden states h [T·N, H] (the layer's blocks
 * 1…T), dL/dh the same. The weights stay in PyTorch's layout, W_ih [4H, F] and W_hh [4H, H]
 * (oneDNN's `ldgoi`), and are reordered on every call into the layouts the primitives ask for
 * (forward reads `ldigo`); the weight gradients come out in oneDNN's layout, which the primitive
 * accumulates into, so those buffers are zeroed first and then added into the caller's dW by a
 * reorder with a sum post-op. The bias is one vector (the layer passes b_ih + b_hh), its gradient
 * added into the caller's `db`. The forward's workspace (what backward reads: gates and states) is
 * the caller's array, so two layers or directions of one shape share a plan, not a workspace.
 *
 * oneDNN's LSTM knows no per-sample lengths: every sample runs all T steps. That is exact for the
 * valid frames and their gradients when the padding comes after each sample's end (a direction
 * that runs backwards gets its input reversed per sample, so it does) and dL/dh is 0 there: each
 * valid frame depends only on the frames before it, and the gradient flowing back from the padding
 * is 0. The states it computes at the padding mean nothing; the layer sets them to 0.
 *
 * On x86 without AVX-512 this is not offered (lstmWorkspaceSize returns 0): not measured on an
 * AVX2 machine yet, where the per-step path has been tuned (packed.c, cells.c).
 */
#include <string.h>
#include "direct.h"

enum { X = 0, WIH, WHH, BIAS, HS, WS, DH, DX, DWIH, DWHH, DB, SLOTS };

static void lstmDescs(int64_t N, int64_t T, int64_t F, int64_t H, dnnl_memory_desc_t *x, dnnl_memory_desc_t *h,
                      dnnl_memory_desc_t *wih, dnnl_memory_desc_t *whh, dnnl_memory_desc_t *wihAny, dnnl_memory_desc_t *whhAny,
                      dnnl_memory_desc_t *bias, dnnl_memory_desc_t *state, bool *ok) {
  const dnnl_dims_t xd = { T, N, F }, hd = { T, N, H }, wl = { 1, 1, F, 4, H }, wi = { 1, 1, H, 4, H }, bd = { 1, 1, 4, H };
  const dnnl_dims_t sd = { 1, 1, N, H };
  *ok = dnnl_memory_desc_init_by_tag(x, 3, xd, dnnl_f32, dnnl_tnc) == dnnl_success &&
        dnnl_memory_desc_init_by_tag(state, 4, sd, dnnl_f32, dnnl_ldnc) == dnnl_success &&
        dnnl_memory_desc_init_by_tag(h, 3, hd, dnnl_f32, dnnl_tnc) == dnnl_success &&
        dnnl_memory_desc_init_by_tag(wih, 5, wl, dnnl_f32, dnnl_ldgoi) == dnnl_success &&
        dnnl_memory_desc_init_by_tag(whh, 5, wi, dnnl_f32, dnnl_ldgoi) == dnnl_success &&
        dnnl_memory_desc_init_by_tag(wihAny, 5, wl, dnnl_f32, dnnl_format_tag_any) == dnnl_success &&
        dnnl_memory_desc_init_by_tag(whhAny, 5, wi, dnnl_f32, dnnl_format_tag_any) == dnnl_success &&
        dnnl_memory_desc_init_by_tag(bias, 4, bd, dnnl_f32, dnnl_ldgo) == dnnl_success;
}

static dnnl_primitive_desc_t forwardPd(Instance *inst, int64_t N, int64_t T, int64_t F, int64_t H) {
  dnnl_memory_desc_t x, h, wih, whh, wihAny, whhAny, bias, state;
  bool ok;
  lstmDescs(N, T, F, H, &x, &h, &wih, &whh, &wihAny, &whhAny, &bias, &state, &ok);
  dnnl_rnn_desc_t d;
  dnnl_primitive_desc_t pd = NULL;
  if (ok && dnnl_lstm_forward_desc_init(&d, dnnl_forward_training, dnnl_unidirectional_left2right, &x, &state, &state,
                                        &wihAny, &whhAny, &bias, &h, NULL, NULL, 0) == dnnl_success &&
      dnnl_primitive_desc_create(&pd, &d, NULL, inst->engine, NULL) != dnnl_success) pd = NULL;
  return pd;
}

/* Reorders of the caller's W_ih, W_hh (slots) into the primitive's weights md `index` 0 and 1 (owned); false on failure. */
static bool weightSteps(Instance *inst, Plan *p, const_dnnl_primitive_desc_t pd, dnnl_query_t what,
                        const dnnl_memory_desc_t *wih, const dnnl_memory_desc_t *whh, int *mWl, int *mWi) {
  const dnnl_memory_desc_t *to[2] = { dnnl_primitive_desc_query_md(pd, what, 0), dnnl_primitive_desc_query_md(pd, what, 1) };
  const dnnl_memory_desc_t *from[2] = { wih, whh };
  const int slots[2] = { WIH, WHH };
  int *mems[2] = { mWl, mWi };
  for (int i = 0; i < 2; i++) {
    if (!to[i]) return false;
    dnnl_primitive_desc_t r = reorderPd(inst, from[i], to[i], false);
    if (!r) return false;
    *mems[i] = planMem(inst, p, to[i], -1);
    const ArgRef args[] = { { DNNL_ARG_FROM, planMem(inst, p, from[i], slots[i]) }, { DNNL_ARG_TO, *mems[i] } };
    const bool ok = planStep(p, r, 2, args);
    dnnl_primitive_desc_destroy(r);
    if (!ok) return false;
  }
  return true;
}

/*
 * The zero initial state (h and c), passed explicitly: given none, oneDNN 2.6's backward took an
 * uninitialised one for the first step's dW_hh (nonzero at T = 1, where it is 0;
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
 * The plan of an LSTM direction's forward (training) or backward: the weights reordered from the
 * caller's layout, then the primitive; the backward then adds its gradients into the caller's.
 */
static Plan *lstmPlan(Instance *inst, bool backward, int64_t N, int64_t T, int64_t F, int64_t H) {
  const int kind = backward ? PLAN_LSTM_BWD : PLAN_LSTM_FWD;
  const Key key = { { kind, N, T, F, H } };
  Plan *p = planFind(inst, &key);
  if (p) return p;
  dnnl_memory_desc_t x, h, wih, whh, wihAny, whhAny, bias, state;
  bool ok;
  lstmDescs(N, T, F, H, &x, &h, &wih, &whh, &wihAny, &whhAny, &bias, &state, &ok);
  dnnl_primitive_desc_t pd = ok ? forwardPd(inst, N, T, F, H) : NULL;
  if (pd && backward) {
    /* the forward's primitive descriptor is the backward's hint */
    dnnl_primitive_desc_t fpd = pd;
    dnnl_rnn_desc_t d;
    if (dnnl_lstm_backward_desc_init(&d, dnnl_backward, dnnl_unidirectional_left2right, &x, &state, &state, &wihAny, &whhAny,
                                     &bias, &h, NULL, NULL, &x, &state, &state, &wihAny, &whhAny, &bias, &h, NULL, NULL, 0) != dnnl_success ||
        dnnl_primitive_desc_create(&pd, &d, NULL, inst->engine, fpd) != dnnl_success) pd = NULL;
    dnnl_primitive_desc_destroy(fpd);
  }
  if (!pd) return NULL;
  p = planNew(inst, &key);
  int mWl = -1, mWi = -1;
  const dnnl_memory_desc_t *ws = dnnl_primitive_desc_query_md(pd, dnnl_query_workspace_md, 0);
  const dnnl_memory_desc_t *dwl = backward ? dnnl_primitive_desc_query_md(pd, dnnl_query_diff_weights_md, 0) : NULL;
  const dnnl_memory_desc_t *dwi = backward ? dnnl_primitive_desc_query_md(pd, dnnl_query_diff_weights_md, 1) : NULL;
  ok = ws && (!backward || (dwl && dwi)) && weightSteps(inst, p, pd, dnnl_query_weights_md, &wih, &whh, &mWl, &mWi);
  /* the gradients in oneDNN's layout, owned: zeroed before each call (the primitive adds into them), then added into the caller's */
  const int mDwl = ok && backward ? planMem(inst, p, dwl, -1) : -1, mDwi = ok && backward ? planMem(inst, p, dwi, -1) : -1;
  const int zero = ok ? zeroState(inst, p, &state) : -1;
  if (ok) {
    ArgRef args[MAX_ARGS] = { { DNNL_ARG_SRC_LAYER, planMem(inst, p, &x, X) }, { DNNL_ARG_WEIGHTS_LAYER, mWl },
                              { DNNL_ARG_WEIGHTS_ITER, mWi }, { DNNL_ARG_BIAS, planMem(inst, p, &bias, BIAS) },
                              { DNNL_ARG_DST_LAYER, planMem(inst, p, &h, HS) }, { DNNL_ARG_WORKSPACE, planMem(inst, p, ws, WS) },
                              { DNNL_ARG_SRC_ITER, zero }, { DNNL_ARG_SRC_ITER_C, zero } };
    int n = 8;
    if (backward) {
      const ArgRef more[] = { { DNNL_ARG_DIFF_DST_LAYER, planMem(inst, p, &h, DH) }, { DNNL_ARG_DIFF_SRC_LAYER, planMem(inst, p, &x, DX) },
                              { DNNL_ARG_DIFF_WEIGHTS_LAYER, mDwl }, { DNNL_ARG_DIFF_WEIGHTS_ITER, mDwi },
                              { DNNL_ARG_DIFF_BIAS, planMem(inst, p, &bias, DB) },
                              { DNNL_ARG_DIFF_SRC_ITER, planMem(inst, p, &state, -1) }, { DNNL_ARG_DIFF_SRC_ITER_C, planMem(inst, p, &state, -1) } };
      memcpy(args + n, more, sizeof more);
      n += (int)(sizeof more / sizeof *more);
    }
    ok = planStep(p, pd, n, args);
  }
  const dnnl_memory_desc_t *from[2] = { dwl, dwi }, *to[2] = { &wih, &whh };
  const int mFrom[2] = { mDwl, mDwi }, slots[2] = { DWIH, DWHH };
  for (int i = 0; backward && ok && i < 2; i++) {
    dnnl_primitive_desc_t r = reorderPd(inst, from[i], to[i], true);
    ok = r != NULL;
    if (ok) {
      const ArgRef args[] = { { DNNL_ARG_FROM, mFrom[i] }, { DNNL_ARG_TO, planMem(inst, p, to[i], slots[i]) } };
      ok = planStep(p, r, 2, args);
      dnnl_primitive_desc_destroy(r);
    }
  }
  if (ok) { planCreated(inst, p, kind, pd); p->aux = mDwl; }
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

static bool getSizes(napi_env env, napi_value *argv, const char *fn, int64_t *s) {
  static const char *const names[] = { "N", "T", "F", "H" };
  return getInts(env, argv, 4, fn, names, s);
}

/* The floats of a plan's workspace (the caller's array in slot WS). */
static int64_t workspaceFloats(const Plan *p) {
  const dnnl_memory_desc_t *md = NULL;
  for (int i = 0; i < p->nmems; i++) if (p->slot[i] == WS) dnnl_memory_get_memory_desc(p->mems[i], &md);
  return md ? (int64_t)((dnnl_memory_desc_get_size(md) + sizeof(float) - 1) / sizeof(float)) : 0;
}

/* lstmWorkspaceSize(N, T, F, H) → floats of the forward's workspace for this shape; 0 when not offered (the layer runs its steps). */
napi_value LstmWorkspaceSize(napi_env env, napi_callback_info info) {
  napi_value argv[4];
  if (!getArgs(env, info, 4, argv, "lstmWorkspaceSize(N, T, F, H)")) return NULL;
  int64_t s[4];
  if (!getSizes(env, argv, "lstmWorkspaceSize", s)) return NULL;
  if (!offered() || s[0] == 0 || s[1] == 0 || s[2] == 0 || s[3] == 0) return numberValue(env, 0);
  oneThread();
  Instance *inst = instance(env);
  /* both plans made now, so a forward that ran is never left without its backward */
  if (!lstmPlan(inst, true, s[0], s[1], s[2], s[3])) { inst->unsupported[PLAN_LSTM_BWD]++; return numberValue(env, 0); }
  const Plan *p = lstmPlan(inst, false, s[0], s[1], s[2], s[3]);
  if (!p) { inst->unsupported[PLAN_LSTM_FWD]++; return numberValue(env, 0); }
  return numberValue(env, (double)workspaceFloats(p));
}

/*
 * lstmForward(N, T, F, H, x, wih, whh, bias, h, workspace) → done? h [T·N, H] from x [T·N, F]
 * (time-major), the workspace kept for lstmBackward.
 * lstmBackward(N, T, F, H, x, wih, whh, bias, h, workspace, dh, dx, dwih, dwhh, db) → done? After
 * lstmForward of the same arrays: dx [T·N, F] written, dwih, dwhh, db += (dh [T·N, H]: dL/dh of
 * each frame's output). The arrays come in the order of the slots.
 */
static napi_value lstmCall(napi_env env, napi_callback_info info, bool backward) {
  const char *fn = backward ? "lstmBackward" : "lstmForward";
  const int arrays = backward ? SLOTS : DH, kind = backward ? PLAN_LSTM_BWD : PLAN_LSTM_FWD;
  napi_value argv[4 + SLOTS];
  if (!getArgs(env, info, (size_t)(4 + arrays), argv, backward ? "lstmBackward(N, T, F, H, x, wih, whh, bias, h, workspace, dh, dx, dwih, dwhh, db)"
                                                                : "lstmForward(N, T, F, H, x, wih, whh, bias, h, workspace)")) return NULL;
  int64_t s[4];
  if (!getSizes(env, argv, fn, s)) return NULL;
  const int64_t N = s[0], T = s[1], F = s[2], H = s[3];
  if (!offered() || !N || !T || !F || !H) return boolValue(env, false);
  oneThread();
  Instance *inst = instance(env);
  Plan *p = lstmPlan(inst, backward, N, T, F, H);
  if (!p) { inst->unsupported[kind]++; return boolValue(env, false); }
  static const char *const names[SLOTS] = { "x", "wih", "whh", "bias", "h", "workspace", "dh", "dx", "dwih", "dwhh", "db" };
  const int64_t want[SLOTS] = { T * N * F, 4 * H * F, 4 * H * H, 4 * H, T * N * H, workspaceFloats(p), T * N * H, T * N * F, 4 * H * F, 4 * H * H, 4 * H };
  float *a[SLOTS];
  for (int i = 0; i < arrays; i++) {
    size_t len;
    if (!getF32(env, argv[4 + i], fn, names[i], false, &a[i], &len) || !need(env, fn, names[i], len, want[i])) return NULL;
  }
  /* the backward's two gradient buffers in oneDNN's layout (p->aux and the next memory) start at zero */
  for (int i = p->aux; backward && i <= p->aux + 1; i++) {
    void *data = NULL;
    const dnnl_memory_desc_t *md = NULL;
    dnnl_memory_get_data_handle(p->mems[i], &data);
    dnnl_memory_get_memory_desc(p->mems[i], &md);
    memset(data, 0, dnnl_memory_desc_get_size(md));
  }
  void *ptrs[SLOTS] = { 0 };
  for (int i = 0; i < arrays; i++) ptrs[i] = a[i];
  return planRun(env, inst, p, ptrs, fn) ? boolValue(env, true) : NULL;
}

napi_value LstmForward(napi_env env, napi_callback_info info) {
  return lstmCall(env, info, false);
}

napi_value LstmBackward(napi_env env, napi_callback_info info) {
  return lstmCall(env, info, true);
}
