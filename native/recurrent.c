/*
 * The native backend's pre-packed sgemm, for the recurrent layers' per-step products: an LSTM's
 * W_hh (4H×H) is the B of every step's [N, H]·W_hhᵀ, and cblas_sgemm packs all of it on every
 * call (OpenBLAS has no pre-packed sgemm). Here it is packed once per pass (packB) and each step
 * runs the micro-kernel over the packed panels (gemmPacked).
 *
 * The micro-kernel is written in GCC vector extensions (16 floats per vector) compiled for AVX-512F
 * only, and used only when the CPU has it (packedKernel() says so): on Zen 5, where OpenBLAS 0.3.21
 * runs its AVX2 "Haswell" kernels, it measured 175–200 GFLOPS on the step shapes against
 * cblas_sgemm's 60–70. Without AVX-512 the backend keeps cblas_sgemm per step: the same source
 * built for AVX2 spills its 32 accumulators (2 GFLOPS), and an AVX2-shaped 6×16 kernel measured
 * only 85 against OpenBLAS's 74, not worth a second kernel.
 *
 * Packed layout: op(B) [K×N] in panels of NR = 32 columns (zero-padded), each panel k-major:
 * element (k, j) at (j / NR)·NR·K + k·NR + j % NR; K·roundup(N, NR) floats in all.
 */
#include "paratrain_native.h"

#define MR 8
#define NR 32
#define MC 128
#define KC 512

typedef float vf __attribute__((vector_size(64), aligned(4)));

#if (defined(__x86_64__) || defined(__i386__)) && defined(__GNUC__)
#define KERNEL_TARGET __attribute__((target("avx512f")))
static bool kernelUsable(void) {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f");
}
#else
#define KERNEL_TARGET
static bool kernelUsable(void) { return false; }
#endif

static int64_t packedLength(int64_t K, int64_t N) { return K * ((N + NR - 1) / NR * NR); }

/* C[MR×NR] (ldc) += Σ_k pa[k·MR + r] · pb[k·NR + c]; -ffp-contract=fast makes the updates FMAs. */
KERNEL_TARGET static void kernel(int64_t kc, const float *pa, const float *pb, float *c, int64_t ldc) {
  vf c0[MR], c1[MR];
  for (int r = 0; r < MR; r++) { c0[r] = (vf){0}; c1[r] = (vf){0}; }
  for (int64_t k = 0; k < kc; k++) {
    const vf b0 = *(const vf *)(pb + k * NR), b1 = *(const vf *)(pb + k * NR + 16);
    for (int r = 0; r < MR; r++) {
      const float a = pa[k * MR + r];
      c0[r] += a * b0;
      c1[r] += a * b1;
    }
  }
  for (int r = 0; r < MR; r++) {
    *(vf *)(c + r * ldc) += c0[r];
    *(vf *)(c + r * ldc + 16) += c1[r];
  }
}

/* op(B) [K×N] into the packed layout at P. */
static void packB(bool tb, int64_t K, int64_t N, const float *B, float *P) {
  for (int64_t j0 = 0; j0 < N; j0 += NR) {
    float *d = P + j0 * K;
    const int64_t cols = N - j0 < NR ? N - j0 : NR;
    if (cols < NR) memset(d, 0, (size_t)(K * NR) * sizeof(float));
    if (tb) {
      /* B stored N×K: row j of B is column j of op(B) */
      for (int64_t c = 0; c < cols; c++) {
        const float *row = B + (j0 + c) * K;
        for (int64_t k = 0; k < K; k++) d[k * NR + c] = row[k];
      }
    } else {
      for (int64_t k = 0; k < K; k++) memcpy(d + k * NR, B + k * N + j0, (size_t)cols * sizeof(float));
    }
  }
}

/* Rows [i0, i0+mc) × depth [k0, k0+kc) of alpha·op(A) into MR-row panels (zero rows past M). */
static void packA(bool ta, const float *A, int64_t M, int64_t K, int64_t i0, int64_t mc, int64_t k0, int64_t kc,
                  float alpha, float *dst) {
  for (int64_t p = 0; p < mc; p += MR) {
    float *d = dst + p * kc;
    for (int64_t r = 0; r < MR; r++) {
      const int64_t i = i0 + p + r;
      if (i >= M) { for (int64_t k = 0; k < kc; k++) d[k * MR + r] = 0; continue; }
      if (ta) for (int64_t k = 0; k < kc; k++) d[k * MR + r] = alpha * A[(k0 + k) * M + i];
      else {
        const float *row = A + i * K + k0;
        for (int64_t k = 0; k < kc; k++) d[k * MR + r] = alpha * row[k];
      }
    }
  }
}

static void gemmPacked(bool ta, int64_t M, int64_t N, int64_t K, float alpha, const float *A, const float *P,
                       float beta, float *C, float *apack) {
  if (beta == 0.0f) memset(C, 0, (size_t)(M * N) * sizeof(float));
  else if (beta != 1.0f) for (int64_t i = 0; i < M * N; i++) C[i] *= beta;
  if (K == 0 || alpha == 0.0f) return;
  const int64_t nk = (K + KC - 1) / KC, kcb = (K + nk - 1) / nk;
  float tile[MR * NR];
  for (int64_t k0 = 0; k0 < K; k0 += kcb) {
    const int64_t kc = K - k0 < kcb ? K - k0 : kcb;
    for (int64_t i0 = 0; i0 < M; i0 += MC) {
      const int64_t mc = M - i0 < MC ? M - i0 : MC;
      packA(ta, A, M, K, i0, mc, k0, kc, alpha, apack);
      for (int64_t j0 = 0; j0 < N; j0 += NR) {
        const float *pb = P + j0 * K + k0 * NR;
        const int64_t nr = N - j0 < NR ? N - j0 : NR;
        for (int64_t p = 0; p < mc; p += MR) {
          const int64_t mr = mc - p < MR ? mc - p : MR;
          float *c = C + (i0 + p) * N + j0;
          if (mr == MR && nr == NR) { kernel(kc, apack + p * kc, pb, c, N); continue; }
          memset(tile, 0, sizeof tile);
          kernel(kc, apack + p * kc, pb, tile, NR);
          for (int64_t r = 0; r < mr; r++) for (int64_t q = 0; q < nr; q++) c[r * N + q] += tile[r * NR + q];
        }
      }
    }
  }
}

/* packedKernel(): 'avx512f' when this CPU runs the micro-kernel, else null (then packB/gemmPacked throw) */
napi_value PackedKernel(napi_env env, napi_callback_info info) {
  (void)info;
  napi_value out;
  if (kernelUsable()) CHECK(napi_create_string_utf8(env, "avx512f", NAPI_AUTO_LENGTH, &out));
  else CHECK(napi_get_null(env, &out));
  return out;
}

static bool requireKernel(napi_env env, const char *fn) {
  if (kernelUsable()) return true;
  char msg[160];
  snprintf(msg, sizeof msg, "%s: this CPU has no AVX-512F for the packed kernel (check packedKernel() first)", fn);
  napi_throw_error(env, NULL, msg);
  return false;
}

/* packedLength(K, N): floats of a pack of op(B) [K×N] */
napi_value PackedLength(napi_env env, napi_callback_info info) {
  napi_value argv[2], out;
  static const char *const names[] = { "size K", "size N" };
  int64_t s[2];
  if (!getArgs(env, info, 2, argv, "packedLength(K, N)")) return NULL;
  if (!getInts(env, argv, 2, "packedLength", names, s)) return NULL;
  CHECK(napi_create_double(env, (double)packedLength(s[0], s[1]), &out));
  return out;
}

/* packB(transB, K, N, B, P) */
napi_value PackB(napi_env env, napi_callback_info info) {
  const char *fn = "packB";
  napi_value argv[5];
  if (!getArgs(env, info, 5, argv, "packB(transB, K, N, B, P)")) return NULL;
  if (!requireKernel(env, fn)) return NULL;
  bool tb;
  if (napi_get_value_bool(env, argv[0], &tb) != napi_ok) { napi_throw_type_error(env, NULL, "packB: transB must be a boolean"); return NULL; }
  static const char *const names[] = { "size K", "size N" };
  int64_t s[2];
  float *B, *P;
  size_t lb, lp;
  if (!getInts(env, argv + 1, 2, fn, names, s)) return NULL;
  if (!getF32(env, argv[3], fn, "B", false, &B, &lb) || !getF32(env, argv[4], fn, "P", false, &P, &lp)) return NULL;
  if (!need(env, fn, "B", lb, s[0] * s[1]) || !need(env, fn, "P", lp, packedLength(s[0], s[1]))) return NULL;
  packB(tb, s[0], s[1], B, P);
  return NULL;
}

/* gemmPacked(transA, M, N, K, alpha, A, aOffset, P, beta, C, cOffset) */
napi_value GemmPacked(napi_env env, napi_callback_info info) {
  const char *fn = "gemmPacked";
  napi_value argv[11];
  if (!getArgs(env, info, 11, argv, "gemmPacked(transA, M, N, K, alpha, A, aOffset, P, beta, C, cOffset)")) return NULL;
  if (!requireKernel(env, fn)) return NULL;
  bool ta;
  if (napi_get_value_bool(env, argv[0], &ta) != napi_ok) { napi_throw_type_error(env, NULL, "gemmPacked: transA must be a boolean"); return NULL; }
  static const char *const names[] = { "size M", "size N", "size K" }, *const aName[] = { "aOffset" }, *const cName[] = { "cOffset" };
  int64_t s[3], aOff, cOff;
  double alpha, beta;
  float *A, *P, *C;
  size_t la, lp, lc;
  if (!getInts(env, argv + 1, 3, fn, names, s) || !getInts(env, argv + 6, 1, fn, aName, &aOff) ||
      !getInts(env, argv + 10, 1, fn, cName, &cOff)) return NULL;
  const int64_t M = s[0], N = s[1], K = s[2];
  if (!getNumber(env, argv[4], fn, "alpha", &alpha) || !getNumber(env, argv[8], fn, "beta", &beta)) return NULL;
  if (!getF32(env, argv[5], fn, "A", false, &A, &la) || !getF32(env, argv[7], fn, "P", false, &P, &lp) ||
      !getF32(env, argv[9], fn, "C", false, &C, &lc)) return NULL;
  if (!need(env, fn, "A", la, aOff + M * K) || !need(env, fn, "P", lp, packedLength(K, N)) ||
      !need(env, fn, "C", lc, cOff + M * N)) return NULL;
  if (M == 0 || N == 0) return NULL;
  Instance *inst = instance(env);
  const size_t bytes = (size_t)MC * KC * sizeof(float);
  if (inst->apackBytes < bytes) {
    float *p = aligned_alloc(64, bytes);
    if (!p) { napi_throw_range_error(env, NULL, "gemmPacked: out of memory for the packed A panels"); return NULL; }
    free(inst->apack);
    inst->apack = p;
    inst->apackBytes = bytes;
  }
  gemmPacked(ta, M, N, K, (float)alpha, A + aOff, P, (float)beta, C + cOff, inst->apack);
  return NULL;
}
