/*
 * gemm as oneDNN's matmul primitive: C[M×N] = alpha·op(A)·op(B) + beta·C, row-major and packed.
 * A transpose is a memory descriptor with swapped strides (no copy); alpha is the primitive's
 * output scale and beta a sum post-op, both fixed when the plan is made (the key holds them:
 * training uses alpha = 1 and beta ∈ {0, 1}). beta = 0 overwrites C (even NaN), like BLAS.
 *
 * setGemm('sgemm') switches this environment to oneDNN's BLAS-like dnnl_sgemm (row-major, its own
 * JIT kernels, nothing cached) instead, so benchmarks can compare the two entry points.
 *
 * Without AVX-512, oneDNN 2.6's gemm loses a third of its speed or more when the operand it walks
 * down the rows of — B untransposed (rows of N floats), A transposed (rows of M) — has rows a
 * multiple of 512 floats (2 KB) apart: its panels land in the same L1 sets. On a Zen 3, with the
 * operands 64-byte aligned as the wasm heap's blocks are, 512³ ran at 46–49 GFLOPS, 72–73 with B
 * copied into rows 16 floats longer, the copy counted; 64×1024×1024 at 35 and 53
 * (bench/onednn-probes/aliasing.c; placed at other offsets in their pages, the operands may not
 * collide, and the copy then costs about a tenth). In `bench kernels`, 512³ went from 43–53% of the
 * peak to 67–87%. So there the copy is made (a buffer kept per environment) and dnnl_sgemm multiplies
 * it; counted as the addon's own (`direct`) and off with setDirect(false), like direct.c's kernels.
 */
#include <stdlib.h>
#include <string.h>
#include "direct.h"

#define ALIASING_FLOATS 512

bool rowsAlias(int64_t ld) {
  return ld % ALIASING_FLOATS == 0;
}

static bool aliased(bool across, int64_t ld) {
  return across && rowsAlias(ld);
}

dnnl_status_t sgemm(char ta, char tb, int64_t M, int64_t N, int64_t K, float alpha, const float *A, int64_t lda,
                    const float *B, int64_t ldb, float beta, float *C, int64_t ldc) {
  sigset_t saved;
  holdSignals(&saved);
  const dnnl_status_t s = dnnl_sgemm(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
  releaseSignals(&saved);
  return s;
}

float *padScratch(Instance *inst, size_t floats) {
  if (floats > inst->padFloats) {
    float *grown = realloc(inst->pad, floats * sizeof(float));
    if (!grown) return NULL;
    inst->pad = grown;
    inst->padFloats = floats;
  }
  return inst->pad;
}

void padRows(const float *m, int64_t rows, int64_t cols, int64_t ld, float *to) {
  for (int64_t r = 0; r < rows; r++) memcpy(to + r * (ld + PADDING_FLOATS), m + r * ld, (size_t)cols * sizeof(float));
}

/* The product with aliased operands padded (see above); false when the copy cannot be made or sgemm fails. */
static bool paddedSgemm(Instance *inst, bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha,
                        const float *A, const float *B, float beta, float *C) {
  const int64_t lda = ta ? M : K, ldb = tb ? K : N;
  const bool padA = aliased(ta, lda), padB = aliased(!tb, ldb);
  const size_t aFloats = padA ? (size_t)(K * (lda + PADDING_FLOATS)) : 0, bFloats = padB ? (size_t)(K * (ldb + PADDING_FLOATS)) : 0;
  float *pad = padScratch(inst, aFloats + bFloats);
  if (!pad) return false;
  if (padA) { padRows(A, K, M, lda, pad); A = pad; }
  if (padB) { padRows(B, K, N, ldb, pad + aFloats); B = pad + aFloats; }
  return sgemm(ta ? 'T' : 'N', tb ? 'T' : 'N', M, N, K, alpha, A, padA ? lda + PADDING_FLOATS : lda,
               B, padB ? ldb + PADDING_FLOATS : ldb, beta, C, N) == dnnl_success;
}

static bool needsPadding(const Instance *inst, bool ta, bool tb, int64_t M, int64_t N, int64_t K) {
#ifdef X86
  return !inst->noDirect && !hasAvx512() && (aliased(ta, M) || aliased(!tb, N));
#else
  (void)inst; (void)ta; (void)tb; (void)M; (void)N; (void)K;
  return false;
#endif
}

/*
 * The matmul C = alpha·op(A)·B' + beta·C, op(A) [M×K] (transA: A stored K×M), cached by shape. tb
 * says how B' [K×N] is given: 0 as stored, 1 transposed (stored N×K), MATMUL_PACKED_B in the
 * primitive's own format (its plan's slot-1 memory has that layout: packed.c).
 */
Plan *matmulPlan(Instance *inst, bool ta, int tb, int64_t M, int64_t N, int64_t K, float alpha, float beta) {
  Key key = { { PLAN_MATMUL, ta, tb, M, N, K } };
  memcpy(&key.v[6], &alpha, sizeof alpha);
  memcpy(&key.v[7], &beta, sizeof beta);
  Plan *p = planFind(inst, &key);
  if (p) return p;
  p = planNew(inst, &key);

  const bool packed = tb == MATMUL_PACKED_B;
  dnnl_memory_desc_t a, b, c;
  const dnnl_dims_t ad = { M, K }, bd = { K, N }, cd = { M, N };
  const dnnl_dims_t as = { ta ? 1 : K, ta ? M : 1 }, bs = { tb ? 1 : N, tb ? K : 1 };
  dnnl_primitive_attr_t attr = NULL;
  dnnl_post_ops_t ops = NULL;
  dnnl_primitive_desc_t pd = NULL;
  dnnl_matmul_desc_t desc;
  bool ok = dnnl_memory_desc_init_by_strides(&a, 2, ad, dnnl_f32, as) == dnnl_success &&
            (packed ? dnnl_memory_desc_init_by_tag(&b, 2, bd, dnnl_f32, dnnl_format_tag_any)
                    : dnnl_memory_desc_init_by_strides(&b, 2, bd, dnnl_f32, bs)) == dnnl_success &&
            dnnl_memory_desc_init_by_tag(&c, 2, cd, dnnl_f32, dnnl_ab) == dnnl_success &&
            dnnl_matmul_desc_init(&desc, &a, &b, NULL, &c) == dnnl_success &&
            dnnl_primitive_attr_create(&attr) == dnnl_success;
  if (ok && alpha != 1.0f) ok = dnnl_primitive_attr_set_output_scales(attr, 1, 0, &alpha) == dnnl_success;
  if (ok && beta != 0.0f) {
    ok = dnnl_post_ops_create(&ops) == dnnl_success && dnnl_post_ops_append_sum(ops, beta) == dnnl_success &&
         dnnl_primitive_attr_set_post_ops(attr, ops) == dnnl_success;
  }
  ok = ok && dnnl_primitive_desc_create(&pd, &desc, attr, inst->engine, NULL) == dnnl_success;
  if (ok) {
    /* packed: the weights in the layout the primitive chose */
    const dnnl_memory_desc_t *w = packed ? dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0) : &b;
    const int ma = planMem(inst, p, &a, 0), mb = planMem(inst, p, w, 1), mc = planMem(inst, p, &c, 2);
    const ArgRef args[] = { { DNNL_ARG_SRC, ma }, { DNNL_ARG_WEIGHTS, mb }, { DNNL_ARG_DST, mc } };
    ok = planStep(p, pd, 3, args);
  }
  if (ok) planCreated(inst, p, PLAN_MATMUL, pd);
  else { planFree(p); p = NULL; }
  if (pd) dnnl_primitive_desc_destroy(pd);
  if (ops) dnnl_post_ops_destroy(ops);
  if (attr) dnnl_primitive_attr_destroy(attr);
  return p;
}

/* sgemm(transA, transB, M, N, K, alpha, A, B, beta, C) → true, or false when oneDNN has no matmul for it (the caller falls back) */
napi_value Sgemm(napi_env env, napi_callback_info info) {
  const char *fn = "gemm";
  GemmArgs a;
  if (!getGemmArgs(env, info, &a)) return NULL;
  const bool ta = a.ta, tb = a.tb;
  const int64_t M = a.M, N = a.N, K = a.K;
  float *A = a.A, *B = a.B, *C = a.C;
  if (M == 0 || N == 0) return boolValue(env, true);
  const float fa = a.alpha, fb = a.beta;
  if (K == 0 || fa == 0.0f) {
    /* No product: BLAS leaves C alone for beta = 1 and scales otherwise; beta = 0 overwrites (even NaN). */
    if (fb == 0.0f) memset(C, 0, (size_t)(M * N) * sizeof(float));
    else if (fb != 1.0f) for (int64_t i = 0; i < M * N; i++) C[i] *= fb;
    return boolValue(env, true);
  }
  oneThread();
  Instance *inst = instance(env);
  if (needsPadding(inst, ta, tb, M, N, K) && paddedSgemm(inst, ta, tb, M, N, K, fa, A, B, fb, C)) {
    inst->direct[PLAN_MATMUL]++;
    return boolValue(env, true);
  }
  if (inst->useSgemm) {
    const dnnl_status_t st = sgemm(ta ? 'T' : 'N', tb ? 'T' : 'N', M, N, K, fa, A, ta ? M : K, B, tb ? K : N, fb, C, N);
    if (st != dnnl_success) { throwStatus(env, fn, "sgemm", st); return NULL; }
    return boolValue(env, true);
  }
  Plan *p = matmulPlan(inst, ta, tb, M, N, K, fa, fb);
  if (!p) { inst->unsupported[PLAN_MATMUL]++; return boolValue(env, false); }
  void *ptrs[] = { A, B, C };
  return planRun(env, inst, p, ptrs, fn) ? boolValue(env, true) : NULL;
}

/* setGemm('matmul' | 'sgemm') → the previous mode: which oneDNN entry point gemm uses in this environment. */
napi_value SetGemm(napi_env env, napi_callback_info info) {
  napi_value argv[1];
  if (!getArgs(env, info, 1, argv, "setGemm('matmul' | 'sgemm')")) return NULL;
  char mode[16] = "";
  size_t len = 0;
  napi_get_value_string_utf8(env, argv[0], mode, sizeof mode, &len);
  if (strcmp(mode, "matmul") != 0 && strcmp(mode, "sgemm") != 0) {
    napi_throw_range_error(env, NULL, "setGemm: mode must be 'matmul' or 'sgemm'");
    return NULL;
  }
  Instance *inst = instance(env);
  napi_value previous;
  CHECK(napi_create_string_utf8(env, inst->useSgemm ? "sgemm" : "matmul", NAPI_AUTO_LENGTH, &previous));
  inst->useSgemm = strcmp(mode, "sgemm") == 0;
  return previous;
}

/* setDirect(on) → the previous setting: whether direct.c's kernels take the shapes they are for, in this environment. */
napi_value SetDirect(napi_env env, napi_callback_info info) {
  napi_value argv[1];
  if (!getArgs(env, info, 1, argv, "setDirect(on: boolean)")) return NULL;
  bool on;
  if (napi_get_value_bool(env, argv[0], &on) != napi_ok) {
    napi_throw_type_error(env, NULL, "setDirect: on must be a boolean");
    return NULL;
  }
  Instance *inst = instance(env);
  const bool previous = !inst->noDirect;
  inst->noDirect = !on;
  return boolValue(env, previous);
}
