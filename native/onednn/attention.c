/*
 * The four attention kernels of src/kernels/attentionKernels.ts in the addon: the per-(sample, head)
 * products as batched matmul primitives (one call over many heads, each head's operands packed one
 * after another in the head-major arrays; transposes as strides, 1/√headDim as the output scale),
 * the softmax rows and their backward in C between them (attention_rows.c). src/kernels/js/attention.ts
 * is the definition; these compute the same in float32 (the row sums in 16 float32 lanes).
 *
 * The score kernels run over chunks of heads whose T×T scores fit in L2 (ROWS_FLOATS), the rows
 * computed right after the product that wrote them, while they are still in cache: attentionWeights
 * multiplies a chunk, then its softmax rows; attentionWeightsBackward computes a chunk's dS rows,
 * then its two products. The value products (attentionApply and its backward) run as one call.
 *
 * A call returns false when oneDNN has no matmul for a product (the backend then runs the js
 * kernels over its gemm); nothing is written then unless a chunk before it ran.
 */
#include <string.h>
#include "attention.h"

/* Scores per chunk of heads: 512 KB, half a Zen 4's L2. */
#define ROWS_FLOATS 131072

/* One product per head, C[b] = alpha·op(A[b])·op(B[b]), op(A) M×K and op(B) K×N, each packed. */
typedef struct {
  bool ta, tb;
  int64_t M, N, K;
  float alpha;
} Product;

/* The cached batched matmul for `count` heads of product `p`; NULL when oneDNN refuses. */
static Plan *productsPlan(Instance *inst, const Product *p, int64_t count) {
  Key key = { { PLAN_ATTENTION, p->ta, p->tb, p->M, p->N, p->K, count } };
  memcpy(&key.v[7], &p->alpha, sizeof p->alpha);
  Plan *plan = planFind(inst, &key);
  if (plan) return plan;
  plan = planNew(inst, &key);
  const int64_t M = p->M, N = p->N, K = p->K;
  const dnnl_dims_t ad = { count, M, K }, bd = { count, K, N }, cd = { count, M, N };
  const dnnl_dims_t as = { M * K, p->ta ? 1 : K, p->ta ? M : 1 }, bs = { K * N, p->tb ? 1 : N, p->tb ? K : 1 };
  const dnnl_dims_t cs = { M * N, N, 1 };
  dnnl_memory_desc_t a, b, c;
  dnnl_matmul_desc_t desc;
  dnnl_primitive_attr_t attr = NULL;
  dnnl_primitive_desc_t pd = NULL;
  bool ok = dnnl_memory_desc_init_by_strides(&a, 3, ad, dnnl_f32, as) == dnnl_success &&
            dnnl_memory_desc_init_by_strides(&b, 3, bd, dnnl_f32, bs) == dnnl_success &&
            dnnl_memory_desc_init_by_strides(&c, 3, cd, dnnl_f32, cs) == dnnl_success &&
            dnnl_matmul_desc_init(&desc, &a, &b, NULL, &c) == dnnl_success &&
            dnnl_primitive_attr_create(&attr) == dnnl_success;
  if (ok && p->alpha != 1.0f) ok = dnnl_primitive_attr_set_output_scales(attr, 1, 0, &p->alpha) == dnnl_success;
  ok = ok && dnnl_primitive_desc_create(&pd, &desc, attr, inst->engine, NULL) == dnnl_success;
  if (ok) {
    const int ma = planMem(inst, plan, &a, 0), mb = planMem(inst, plan, &b, 1), mc = planMem(inst, plan, &c, 2);
    const ArgRef args[] = { { DNNL_ARG_SRC, ma }, { DNNL_ARG_WEIGHTS, mb }, { DNNL_ARG_DST, mc } };
    ok = planStep(plan, pd, 3, args);
  }
  if (ok) planCreated(inst, plan, PLAN_ATTENTION, pd);
  else { planFree(plan); plan = NULL; }
  if (pd) dnnl_primitive_desc_destroy(pd);
  if (attr) dnnl_primitive_attr_destroy(attr);
  return plan;
}

/* Heads [first, first + count) of product p: RAN, REFUSED (no matmul for it), or THREW. */
enum { RAN = 1, REFUSED = 0, THREW = -1 };
static int products(napi_env env, Instance *inst, const Product *p, int64_t first, int64_t count, const float *A,
                    const float *B, float *C, const char *fn) {
  if (count == 0) return RAN;
  Plan *plan = productsPlan(inst, p, count);
  if (!plan) { inst->unsupported[PLAN_ATTENTION]++; return REFUSED; }
  void *ptrs[] = { (void *)(A + first * p->M * p->K), (void *)(B + first * p->K * p->N), C + first * p->M * p->N };
  return planRun(env, inst, plan, ptrs, fn) ? RAN : THREW;
}

/* The call's arguments: the arrays (lengths among them where asked), then N, heads, T, headDim (and causal where asked). */
typedef struct {
  int64_t N, heads, T, dh;
  bool causal;
  float *a[6];
  int32_t *lengths;
} Args;

/*
 * Reads `arrays` Float32Arrays (named `names`; their lengths from `scores`: T·T per head, else
 * T·headDim), an optional lengths array after the first `lengthsAt` of them (-1: none), the four
 * sizes and `causal`; checks every length. False after throwing.
 */
static bool getAttentionArgs(napi_env env, napi_callback_info info, const char *fn, const char *usage, int arrays,
                             const char *const *names, const bool *scores, int lengthsAt, bool causal, Args *g) {
  napi_value argv[12];
  const int extra = lengthsAt >= 0 ? 1 : 0, want = arrays + extra + 4 + (causal ? 1 : 0);
  if (!getArgs(env, info, (size_t)want, argv, usage)) return false;
  static const char *const sizes[] = { "size N", "size heads", "size T", "size headDim" };
  int64_t s[4];
  if (!getInts(env, argv + arrays + extra, 4, fn, sizes, s)) return false;
  g->N = s[0]; g->heads = s[1]; g->T = s[2]; g->dh = s[3];
  if (mulSat(mulSat(mulSat(g->N, g->heads), g->T), g->T > g->dh ? g->T : g->dh) > INT32_MAX) {
    char msg[120];
    snprintf(msg, sizeof msg, "%s: N·heads·T·max(T, headDim) must be below 2^31", fn);
    napi_throw_range_error(env, NULL, msg);
    return false;
  }
  g->causal = false;
  if (causal && napi_get_value_bool(env, argv[want - 1], &g->causal) != napi_ok) {
    char msg[80];
    snprintf(msg, sizeof msg, "%s: causal must be a boolean", fn);
    napi_throw_type_error(env, NULL, msg);
    return false;
  }
  const int64_t heads = g->N * g->heads;
  for (int i = 0, v = 0; i < arrays; i++, v++) {
    if (i == lengthsAt) v++;
    size_t len;
    if (!getF32(env, argv[v], fn, names[i], false, &g->a[i], &len) ||
        !need(env, fn, names[i], len, heads * g->T * (scores[i] ? g->T : g->dh)))
      return false;
  }
  g->lengths = NULL;
  if (lengthsAt >= 0) {
    napi_valuetype t;
    size_t len = 0;
    if (napi_typeof(env, argv[lengthsAt], &t) != napi_ok) { throwLast(env, fn); return false; }
    if (t != napi_null && t != napi_undefined &&
        (!getI32(env, argv[lengthsAt], fn, "lengths", &g->lengths, &len) || !need(env, fn, "lengths", len, g->N)))
      return false;
  }
  return true;
}

/* Heads per chunk of the score kernels: their scores within ROWS_FLOATS, one at least. */
static int64_t chunkHeads(const Args *g) {
  const int64_t per = g->T * g->T, chunk = per > 0 ? ROWS_FLOATS / per : 1;
  return chunk < 1 ? 1 : chunk;
}

/* attentionWeights(q, k, lengths | null, probs, N, heads, T, headDim, causal) → false when oneDNN has no matmul */
napi_value AttentionWeights(napi_env env, napi_callback_info info) {
  static const char *const fn = "attentionWeights";
  static const char *const names[] = { "q", "k", "probs" };
  static const bool scores[] = { false, false, true };
  Args g;
  if (!getAttentionArgs(env, info, fn, "attentionWeights(q, k, lengths, probs, N, heads, T, headDim, causal)", 3, names,
                        scores, 2, true, &g))
    return NULL;
  const int64_t heads = g.N * g.heads, T = g.T;
  float *const probs = g.a[2];
  if (heads == 0 || T == 0) return boolValue(env, true);
  oneThread();
  Instance *inst = instance(env);
  const Product s = { false, true, T, T, g.dh, g.dh > 0 ? 1.0f / sqrtf((float)g.dh) : 1.0f };
  const RowsPath path = rowsPath(inst);
  const int64_t chunk = chunkHeads(&g);
  for (int64_t b0 = 0; b0 < heads; b0 += chunk) {
    const int64_t count = heads - b0 < chunk ? heads - b0 : chunk;
    if (g.dh == 0) memset(probs + b0 * T * T, 0, (size_t)(count * T * T) * sizeof(float));
    else {
      const int r = products(env, inst, &s, b0, count, g.a[0], g.a[1], probs, fn);
      if (r != RAN) return r == THREW ? NULL : boolValue(env, false);
    }
    for (int64_t b = b0; b < b0 + count; b++) {
      const int64_t n = b / g.heads, len = g.lengths ? (g.lengths[n] < 0 ? 0 : g.lengths[n] > T ? T : g.lengths[n]) : T;
      softmaxRows(probs + b * T * T, T, len, g.causal, path);
    }
  }
  if (path != ROWS_SCALAR) inst->direct[PLAN_ATTENTION]++;
  return boolValue(env, true);
}

/* attentionApply(probs, v, out, N, heads, T, headDim): out = P·V per head */
napi_value AttentionApply(napi_env env, napi_callback_info info) {
  static const char *const fn = "attentionApply";
  static const char *const names[] = { "probs", "v", "out" };
  static const bool scores[] = { true, false, false };
  Args g;
  if (!getAttentionArgs(env, info, fn, "attentionApply(probs, v, out, N, heads, T, headDim)", 3, names, scores, -1,
                        false, &g))
    return NULL;
  const int64_t heads = g.N * g.heads;
  if (heads == 0 || g.T == 0 || g.dh == 0) return boolValue(env, true);
  oneThread();
  const Product o = { false, false, g.T, g.dh, g.T, 1.0f };
  const int r = products(env, instance(env), &o, 0, heads, g.a[0], g.a[1], g.a[2], fn);
  return r == THREW ? NULL : boolValue(env, r == RAN);
}

/* attentionApplyBackward(probs, v, dout, dprobs, dv, N, heads, T, headDim): dV = Pᵀ·dO, dP = dO·Vᵀ */
napi_value AttentionApplyBackward(napi_env env, napi_callback_info info) {
  static const char *const fn = "attentionApplyBackward";
  static const char *const names[] = { "probs", "v", "dout", "dprobs", "dv" };
  static const bool scores[] = { true, false, false, true, false };
  Args g;
  if (!getAttentionArgs(env, info, fn, "attentionApplyBackward(probs, v, dout, dprobs, dv, N, heads, T, headDim)", 5,
                        names, scores, -1, false, &g))
    return NULL;
  const int64_t heads = g.N * g.heads, T = g.T;
  if (heads == 0 || T == 0) return boolValue(env, true);
  if (g.dh == 0) {
    memset(g.a[3], 0, (size_t)(heads * T * T) * sizeof(float));
    return boolValue(env, true);
  }
  oneThread();
  Instance *inst = instance(env);
  const Product dv = { true, false, T, g.dh, T, 1.0f }, dp = { false, true, T, T, g.dh, 1.0f };
  int r = products(env, inst, &dv, 0, heads, g.a[0], g.a[2], g.a[4], fn);
  if (r == RAN) r = products(env, inst, &dp, 0, heads, g.a[2], g.a[1], g.a[3], fn);
  return r == THREW ? NULL : boolValue(env, r == RAN);
}

/* attentionWeightsBackward(q, k, probs, dprobs, dq, dk, N, heads, T, headDim): dS over dprobs, dQ = dS·K/√dh, dK = dSᵀ·Q/√dh */
napi_value AttentionWeightsBackward(napi_env env, napi_callback_info info) {
  static const char *const fn = "attentionWeightsBackward";
  static const char *const names[] = { "q", "k", "probs", "dprobs", "dq", "dk" };
  static const bool scores[] = { false, false, true, true, false, false };
  Args g;
  if (!getAttentionArgs(env, info, fn, "attentionWeightsBackward(q, k, probs, dprobs, dq, dk, N, heads, T, headDim)", 6,
                        names, scores, -1, false, &g))
    return NULL;
  const int64_t heads = g.N * g.heads, T = g.T;
  if (heads == 0 || T == 0) return boolValue(env, true);
  oneThread();
  Instance *inst = instance(env);
  const float scale = g.dh > 0 ? 1.0f / sqrtf((float)g.dh) : 1.0f;
  const Product dq = { false, false, T, g.dh, T, scale }, dk = { true, false, T, g.dh, T, scale };
  const RowsPath path = rowsPath(inst);
  const int64_t chunk = chunkHeads(&g), tail = heads % chunk;
  /* dS overwrites dP: every plan made before the first row, so a refusal leaves dP for the js kernels */
  if (g.dh > 0)
    for (int i = 0; i < 4; i++) {
      const int64_t count = i % 2 ? tail : (heads < chunk ? heads : chunk);
      if (count > 0 && !productsPlan(inst, i < 2 ? &dq : &dk, count)) {
        inst->unsupported[PLAN_ATTENTION]++;
        return boolValue(env, false);
      }
    }
  for (int64_t b0 = 0; b0 < heads; b0 += chunk) {
    const int64_t count = heads - b0 < chunk ? heads - b0 : chunk;
    scoreGradRows(g.a[2] + b0 * T * T, g.a[3] + b0 * T * T, count * T, T, path);
    if (g.dh == 0) continue;
    int r = products(env, inst, &dq, b0, count, g.a[3], g.a[1], g.a[4], fn);
    if (r == RAN) r = products(env, inst, &dk, b0, count, g.a[3], g.a[0], g.a[5], fn);
    if (r != RAN) return r == THREW ? NULL : boolValue(env, false);
  }
  if (path != ROWS_SCALAR) inst->direct[PLAN_ATTENTION]++;
  return boolValue(env, true);
}
