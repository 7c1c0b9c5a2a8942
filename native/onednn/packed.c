/*
 * The recurrent layers' per-step product with pre-packed weights: C[M×N] = alpha·op(A)·op(B) +
 * beta·C, where op(B) (W_hh, the same for every frame of a pass) was reordered once into the
 * layout oneDNN's matmul primitive asks for when its weights are described as `any` (blocked
 * panels its brgemm kernel reads straight). With plain strided weights the primitive re-packs them
 * on every call: measured on the LSTM's [32, 512]·[512, 2048] step, 146 GFLOPS plain vs 189 packed.
 *
 * The packed layout belongs to a primitive of one shape (M, N, K and the transposes), so a pack is
 * made for the M of its first product (packedWeightsSize, packWeights) and used by products of that
 * shape only (gemmPackedWeights), whose plan checks that its weights layout is the pack's (alpha
 * and beta, which do not change it, are fixed per plan as in gemm.c).
 *
 * Without AVX-512 the pack is instead op(B) as a K×N matrix with rows PADDING_FLOATS longer
 * (transposed when transB), multiplied by dnnl_sgemm as an untransposed B (A copied into padded
 * rows when they are a multiple of 512 floats apart): oneDNN 2.6's AVX2 matmul on its packed layout
 * ran the LSTM's forward step at 36 GFLOPS on a Zen 3, dnnl_sgemm on plain W_hh at 53 and on padded
 * rows at 66 (gemm.c says why: cache-set aliasing); transposed into K×N it ran at 73, as the
 * backward step (already K×N) did. A pack of this kind serves products of any M.
 */
#include <stdio.h>
#include <string.h>
#include "direct.h"

/*
 * Whether packs are padded rows for dnnl_sgemm (x86 without AVX-512) rather than the primitive's
 * layout. Fixed per CPU, not by setDirect: a pack and its products must agree on the layout.
 */
static bool paddedPacks(void) {
#ifdef X86
  return !hasAvx512();
#else
  return false;
#endif
}

/* Floats of a padded pack: op(B) as K rows of N + PADDING_FLOATS. */
static int64_t paddedPackSize(int64_t N, int64_t K) {
  return K * (N + PADDING_FLOATS);
}

/* op(B) (B is K×N, or N×K when transB) into P as K rows N + PADDING_FLOATS apart, in 32×32 tiles when transposing. */
static void paddedPack(bool tb, int64_t N, int64_t K, const float *B, float *P) {
  const int64_t ldp = N + PADDING_FLOATS;
  if (!tb) { padRows(B, K, N, N, P); return; }
  for (int64_t n0 = 0; n0 < N; n0 += 32)
    for (int64_t k0 = 0; k0 < K; k0 += 32)
      for (int64_t n = n0; n < n0 + 32 && n < N; n++)
        for (int64_t k = k0; k < k0 + 32 && k < K; k++) P[k * ldp + n] = B[n * K + k];
}

/* C = alpha·op(A)·op(B) + beta·C with op(B) a padded pack; A copied into padded rows when they alias. */
static bool paddedPackProduct(Instance *inst, bool ta, int64_t M, int64_t N, int64_t K, float alpha,
                              const float *A, const float *P, float beta, float *C) {
  const int64_t lda = ta ? M : K, ldp = N + PADDING_FLOATS;
  const bool padA = rowsAlias(lda);
  if (padA) {
    float *pad = padScratch(inst, (size_t)((ta ? K : M) * (lda + PADDING_FLOATS)));
    if (!pad) return false;
    padRows(A, ta ? K : M, ta ? M : K, lda, pad);
    A = pad;
  }
  return sgemm(ta ? 'T' : 'N', 'N', M, N, K, alpha, A, padA ? lda + PADDING_FLOATS : lda, P, ldp, beta, C, N) == dnnl_success;
}

/* The weights layout of a plan (its memory object for slot 1). */
static const dnnl_memory_desc_t *weightsMd(const Plan *p) {
  const dnnl_memory_desc_t *md = NULL;
  for (int i = 0; i < p->nmems; i++) if (p->slot[i] == 1) dnnl_memory_get_memory_desc(p->mems[i], &md);
  return md;
}

/* The reorder of B (stored N×K when transB) into the layout of the (M, N, K, transA) matmul's weights. */
static Plan *packPlan(Instance *inst, bool ta, bool tb, int64_t M, int64_t N, int64_t K) {
  const Key key = { { PLAN_MATMUL, ta, tb, M, N, K, 0, 0, 1 } };  /* 1 in word 8: the pack, not a product */
  Plan *p = planFind(inst, &key);
  if (p) return p;
  const Plan *product = matmulPlan(inst, ta, MATMUL_PACKED_B, M, N, K, 1.0f, 0.0f);
  if (!product || !weightsMd(product)) return NULL;
  /* a copy: planNew may start the cache over, freeing `product` */
  const dnnl_memory_desc_t toMd = *weightsMd(product), *to = &toMd;
  p = planNew(inst, &key);
  dnnl_memory_desc_t from;
  const dnnl_dims_t bd = { K, N }, bs = { tb ? 1 : N, tb ? K : 1 };
  dnnl_primitive_desc_t r = NULL;
  bool ok = dnnl_memory_desc_init_by_strides(&from, 2, bd, dnnl_f32, bs) == dnnl_success &&
            (r = reorderPd(inst, &from, to, false)) != NULL;
  if (ok) {
    const ArgRef args[] = { { DNNL_ARG_FROM, planMem(inst, p, &from, 0) }, { DNNL_ARG_TO, planMem(inst, p, to, 1) } };
    ok = planStep(p, r, 2, args);
  }
  if (ok) planCreated(inst, p, PLAN_MATMUL, r);
  else { planFree(p); p = NULL; }
  if (r) dnnl_primitive_desc_destroy(r);
  return p;
}

static bool getShape(napi_env env, napi_value *argv, const char *fn, bool *ta, bool *tb, int64_t *s) {
  static const char *const names[] = { "size M", "size N", "size K" };
  if (napi_get_value_bool(env, argv[0], ta) != napi_ok || napi_get_value_bool(env, argv[1], tb) != napi_ok) {
    char msg[120];
    snprintf(msg, sizeof msg, "%s: transA and transB must be booleans", fn);
    napi_throw_type_error(env, NULL, msg);
    return false;
  }
  return getInts(env, argv + 2, 3, fn, names, s);
}

/* packedWeightsSize(transA, transB, M, N, K) → floats of the pack for products of this shape (0: oneDNN has none). */
napi_value PackedWeightsSize(napi_env env, napi_callback_info info) {
  napi_value argv[5];
  if (!getArgs(env, info, 5, argv, "packedWeightsSize(transA, transB, M, N, K)")) return NULL;
  bool ta, tb;
  int64_t s[3];
  if (!getShape(env, argv, "packedWeightsSize", &ta, &tb, s)) return NULL;
  if (s[0] == 0 || s[1] == 0 || s[2] == 0) return numberValue(env, 0);
  if (paddedPacks()) return numberValue(env, (double)paddedPackSize(s[1], s[2]));
  oneThread();
  const Plan *p = packPlan(instance(env), ta, tb, s[0], s[1], s[2]);
  const dnnl_memory_desc_t *md = p ? weightsMd(p) : NULL;
  return numberValue(env, md ? (double)(dnnl_memory_desc_get_size(md) / sizeof(float)) : 0);
}

/* packWeights(transA, transB, M, N, K, B, packed) → done? B (K×N, or N×K when transB) into packed. */
napi_value PackWeights(napi_env env, napi_callback_info info) {
  const char *fn = "packWeights";
  napi_value argv[7];
  if (!getArgs(env, info, 7, argv, "packWeights(transA, transB, M, N, K, B, packed)")) return NULL;
  bool ta, tb;
  int64_t s[3];
  float *B, *P;
  size_t lb, lp;
  if (!getShape(env, argv, fn, &ta, &tb, s) || !getF32(env, argv[5], fn, "B", false, &B, &lb) ||
      !getF32(env, argv[6], fn, "packed", false, &P, &lp) || !need(env, fn, "B", lb, s[1] * s[2])) return NULL;
  if (paddedPacks()) {
    if (!s[0] || !s[1] || !s[2]) return boolValue(env, false);
    if (!need(env, fn, "packed", lp, paddedPackSize(s[1], s[2]))) return NULL;
    paddedPack(tb, s[1], s[2], B, P);
    return boolValue(env, true);
  }
  oneThread();
  Instance *inst = instance(env);
  Plan *p = s[0] && s[1] && s[2] ? packPlan(inst, ta, tb, s[0], s[1], s[2]) : NULL;
  if (!p) return boolValue(env, false);
  if (!need(env, fn, "packed", lp, (int64_t)(dnnl_memory_desc_get_size(weightsMd(p)) / sizeof(float)))) return NULL;
  void *ptrs[] = { B, P };
  return planRun(env, inst, p, ptrs, fn) ? boolValue(env, true) : NULL;
}

/* gemmPackedWeights(transA, transB, M, N, K, alpha, A, packed, beta, C) → done? (false: the caller multiplies by plain B) */
napi_value GemmPackedWeights(napi_env env, napi_callback_info info) {
  const char *fn = "gemmPacked";
  napi_value argv[10];
  if (!getArgs(env, info, 10, argv, "gemmPackedWeights(transA, transB, M, N, K, alpha, A, packed, beta, C)")) return NULL;
  bool ta, tb;
  int64_t s[3];
  double alpha, beta;
  float *A, *P, *C;
  size_t la, lp, lc;
  if (!getShape(env, argv, fn, &ta, &tb, s) || !getNumber(env, argv[5], fn, "alpha", &alpha) || !getNumber(env, argv[8], fn, "beta", &beta) ||
      !getF32(env, argv[6], fn, "A", false, &A, &la) || !getF32(env, argv[7], fn, "packed", false, &P, &lp) ||
      !getF32(env, argv[9], fn, "C", false, &C, &lc)) return NULL;
  const int64_t M = s[0], N = s[1], K = s[2];
  if (!need(env, fn, "A", la, M * K) || !need(env, fn, "C", lc, M * N)) return NULL;
  if (M == 0 || N == 0 || K == 0 || alpha == 0.0) return boolValue(env, false);
  oneThread();
  Instance *inst = instance(env);
  if (paddedPacks()) {
    if (!need(env, fn, "packed", lp, paddedPackSize(N, K))) return NULL;
    if (paddedPackProduct(inst, ta, M, N, K, (float)alpha, A, P, (float)beta, C)) { inst->direct[PLAN_MATMUL]++; return boolValue(env, true); }
    inst->unsupported[PLAN_MATMUL]++;
    return boolValue(env, false);
  }
  const Plan *pack = packPlan(inst, ta, tb, M, N, K);
  if (!pack) { inst->unsupported[PLAN_MATMUL]++; return boolValue(env, false); }
  /* a copy: making the product's plan may start the cache over, freeing `pack` */
  const dnnl_memory_desc_t packMd = *weightsMd(pack);
  Plan *p = matmulPlan(inst, ta, MATMUL_PACKED_B, M, N, K, (float)alpha, (float)beta);
  /* the pack fits this product only when the plan reads weights in the layout the pack was made in */
  if (!p || !dnnl_memory_desc_equal(weightsMd(p), &packMd)) { inst->unsupported[PLAN_MATMUL]++; return boolValue(env, false); }
  if (!need(env, fn, "packed", lp, (int64_t)(dnnl_memory_desc_get_size(weightsMd(p)) / sizeof(float)))) return NULL;
  void *ptrs[] = { A, P, C };
  return planRun(env, inst, p, ptrs, fn) ? boolValue(env, true) : NULL;
}
