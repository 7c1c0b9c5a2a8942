/*
 * paratrain_native: the optional `native` kernel backend's addon (Node-API, plain C).
 *
 * Exposes OpenBLAS's cblas_sgemm over Float32Arrays, and 2-D convolutions (NHWC activations,
 * [KH,KW,C,F] filters) done as im2col + sgemm in chunks of output pixels, so a whole conv layer is
 * one call. Every array may be a view at any byteOffset into an ArrayBuffer or a SharedArrayBuffer
 * (including a shared WebAssembly.Memory): napi_get_typedarray_info returns the data pointer
 * already advanced by the view's byteOffset. Lengths are checked here (in 64-bit arithmetic) before
 * any memory is touched: a short array is a RangeError, never an out-of-bounds access (the
 * argument helpers are napi_args.h, shared with the onednn addon).
 *
 * Threading: paratrain runs one device per core, so BLAS must not start threads of its own. The
 * module sets openblas_set_num_threads(1) when it loads (and the JS loader sets
 * OPENBLAS_NUM_THREADS=1 before the library is first loaded, so the pthread build does not even
 * create its idle pool). OpenBLAS ≥ 0.3.7 is safe to call from several threads at once; each Node
 * environment (main thread, worker) gets its own im2col scratch through napi_set_instance_data.
 *
 * Conventions match src/kernels/backend.ts: y/dx are overwritten, dw/db are accumulated (+=).
 * The recurrent layers' pre-packed gemm (packB, gemmPacked) is in recurrent.c; the argument helpers
 * and the per-environment Instance they share are declared in paratrain_native.h.
 */
#include "paratrain_native.h"
#include <cblas.h>

/* OpenBLAS extensions (declared here too, in case the cblas.h found is not OpenBLAS's own). */
void openblas_set_num_threads(int num_threads);
int openblas_get_num_threads(void);
int openblas_get_parallel(void);
char *openblas_get_config(void);
char *openblas_get_corename(void);

/* Target bytes of one im2col chunk (tuned with bench/kernels.ts; see setConvChunkBytes). */
#define DEFAULT_CHUNK_BYTES (1 << 20)
#define MIN_CHUNK_BYTES 4096

Instance *instance(napi_env env) {
  Instance *inst = NULL;
  napi_get_instance_data(env, (void **)&inst);
  return inst;
}

/* The environment's im2col scratch, grown to at least `bytes`; NULL after throwing. */
static float *scratch(napi_env env, Instance *inst, size_t bytes) {
  if (bytes <= inst->colBytes) return inst->col;
  size_t size = (bytes + 63) & ~(size_t)63;
  float *p = aligned_alloc(64, size);
  if (!p) { napi_throw_range_error(env, NULL, "paratrain_native: out of memory for the im2col buffer"); return NULL; }
  free(inst->col);
  inst->col = p;
  inst->colBytes = size;
  return p;
}

static inline int ld(int64_t v) { return v < 1 ? 1 : (int)v; }

/* ------------------------------------------------------------------ sgemm */

/* C[M×N] = alpha·op(A)·op(B) + beta·C (row-major, packed: lda = columns of the stored A). */
static void gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const float *A,
                 const float *B, float beta, float *C) {
  if (M == 0 || N == 0) return;
  if (K == 0 || alpha == 0.0f) {
    /* BLAS leaves C alone for beta = 1 and scales otherwise; beta = 0 overwrites (even NaN). */
    if (beta == 0.0f) memset(C, 0, (size_t)(M * N) * sizeof(float));
    else if (beta != 1.0f) for (int64_t i = 0; i < M * N; i++) C[i] *= beta;
    return;
  }
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
              (int)M, (int)N, (int)K, alpha, A, ld(ta ? M : K), B, ld(tb ? K : N), beta, C, ld(N));
}

/* sgemm(transA, transB, M, N, K, alpha, A, B, beta, C) */
static napi_value Sgemm(napi_env env, napi_callback_info info) {
  GemmArgs a;
  if (!getGemmArgs(env, info, &a)) return NULL;
  gemm(a.ta, a.tb, a.M, a.N, a.K, a.alpha, a.A, a.B, a.beta, a.C);
  return NULL;
}

/* ------------------------------------------------------------------ convolution */

static bool isPointwise(const Geom *g) {
  return g->KH == 1 && g->KW == 1 && g->sh == 1 && g->sw == 1 && g->pt == 0 && g->pl == 0 &&
         g->OH == g->H && g->OW == g->W;
}

/* Output pixels per chunk: the column buffer stays near chunkBytes, at least 16 rows. */
static int64_t chunkRows(const Instance *inst, int64_t K, int64_t total) {
  int64_t rows = (int64_t)inst->chunkBytes / (K * 4);
  if (rows < 16) rows = 16;
  if (rows > total) rows = total;
  return rows < 1 ? 1 : rows;
}

/* col[r, (kh*KW + kw)*C + c] = x[n, oh*sh - pt + kh, ow*sw - pl + kw, c] (0 outside), rows r0.. */
static void im2col(const Geom *g, const float *x, int64_t r0, int64_t rows, float *col) {
  const int64_t C = g->C, KW = g->KW, K = g->KH * KW * C, KWC = KW * C, plane = g->OH * g->OW;
  int64_t n = r0 / plane, rem = r0 % plane, oh = rem / g->OW, ow = rem % g->OW;
  for (int64_t r = 0; r < rows; r++) {
    float *d = col + r * K;
    const int64_t iw0 = ow * g->sw - g->pl;
    const bool fullW = iw0 >= 0 && iw0 + KW <= g->W;
    for (int64_t kh = 0; kh < g->KH; kh++, d += KWC) {
      const int64_t ih = oh * g->sh - g->pt + kh;
      if (ih < 0 || ih >= g->H) { memset(d, 0, (size_t)KWC * sizeof(float)); continue; }
      const float *row = x + (n * g->H + ih) * g->W * C;
      if (fullW) { memcpy(d, row + iw0 * C, (size_t)KWC * sizeof(float)); continue; }
      for (int64_t kw = 0; kw < KW; kw++) {
        const int64_t iw = iw0 + kw;
        if (iw < 0 || iw >= g->W) memset(d + kw * C, 0, (size_t)C * sizeof(float));
        else memcpy(d + kw * C, row + iw * C, (size_t)C * sizeof(float));
      }
    }
    if (++ow == g->OW) { ow = 0; if (++oh == g->OH) { oh = 0; n++; } }
  }
}

static inline void addTo(float *restrict dst, const float *restrict src, int64_t n) {
  for (int64_t i = 0; i < n; i++) dst[i] += src[i];
}

/* dx[n, ih, iw, c] += dcol[r, (kh*KW + kw)*C + c]: the adjoint of im2col. */
static void col2imAdd(const Geom *g, const float *dcol, int64_t r0, int64_t rows, float *dx) {
  const int64_t C = g->C, KW = g->KW, K = g->KH * KW * C, KWC = KW * C, plane = g->OH * g->OW;
  int64_t n = r0 / plane, rem = r0 % plane, oh = rem / g->OW, ow = rem % g->OW;
  for (int64_t r = 0; r < rows; r++) {
    const float *s = dcol + r * K;
    const int64_t iw0 = ow * g->sw - g->pl;
    const bool fullW = iw0 >= 0 && iw0 + KW <= g->W;
    for (int64_t kh = 0; kh < g->KH; kh++, s += KWC) {
      const int64_t ih = oh * g->sh - g->pt + kh;
      if (ih < 0 || ih >= g->H) continue;
      float *row = dx + (n * g->H + ih) * g->W * C;
      if (fullW) { addTo(row + iw0 * C, s, KWC); continue; }
      for (int64_t kw = 0; kw < KW; kw++) {
        const int64_t iw = iw0 + kw;
        if (iw >= 0 && iw < g->W) addTo(row + iw * C, s + kw * C, C);
      }
    }
    if (++ow == g->OW) { ow = 0; if (++oh == g->OH) { oh = 0; n++; } }
  }
}

static void fillBias(float *y, int64_t rows, int64_t F, const float *bias) {
  for (int64_t r = 0; r < rows; r++) memcpy(y + r * F, bias, (size_t)F * sizeof(float));
}

/* conv2dForward(x, w, bias | null, y, N, H, W, C, KH, KW, F, sh, sw, pt, pl, OH, OW) */
static napi_value Conv2dForward(napi_env env, napi_callback_info info) {
  const char *fn = "conv2dForward";
  napi_value argv[17];
  if (!getArgs(env, info, 17, argv, "conv2dForward(x, w, bias, y, N, H, W, C, KH, KW, F, sh, sw, pt, pl, OH, OW)")) return NULL;
  Geom g;
  if (!getGeom(env, argv + 4, fn, true, &g)) return NULL;
  float *x, *w, *bias, *y;
  size_t lx, lw, lb, ly;
  if (!getF32(env, argv[0], fn, "x", false, &x, &lx) || !getF32(env, argv[1], fn, "w", false, &w, &lw) ||
      !getF32(env, argv[2], fn, "bias", true, &bias, &lb) || !getF32(env, argv[3], fn, "y", false, &y, &ly)) return NULL;
  const int64_t K = g.KH * g.KW * g.C, total = g.N * g.OH * g.OW;
  if (!need(env, fn, "x", lx, g.N * g.H * g.W * g.C) || !need(env, fn, "w", lw, K * g.F) ||
      !need(env, fn, "y", ly, total * g.F) || (bias && !need(env, fn, "bias", lb, g.F))) return NULL;
  if (total == 0 || g.F == 0) return NULL;
  const float beta = bias ? 1.0f : 0.0f;
  if (K == 0) {
    /* An empty window: y is the bias (or 0). */
    if (bias) fillBias(y, total, g.F, bias);
    else memset(y, 0, (size_t)(total * g.F) * sizeof(float));
    return NULL;
  }
  if (isPointwise(&g)) {
    if (bias) fillBias(y, total, g.F, bias);
    gemm(false, false, total, g.F, K, 1.0f, x, w, beta, y);
    return NULL;
  }
  Instance *inst = instance(env);
  const int64_t step = chunkRows(inst, K, total);
  float *col = scratch(env, inst, (size_t)(step * K) * sizeof(float));
  if (!col) return NULL;
  for (int64_t r0 = 0; r0 < total; r0 += step) {
    const int64_t rows = total - r0 < step ? total - r0 : step;
    im2col(&g, x, r0, rows, col);
    float *yc = y + r0 * g.F;
    if (bias) fillBias(yc, rows, g.F, bias);
    gemm(false, false, rows, g.F, K, 1.0f, col, w, beta, yc);
  }
  return NULL;
}

/* conv2dBackwardData(dy, w, dx, N, H, W, C, KH, KW, F, sh, sw, pt, pl, OH, OW): dx overwritten. */
static napi_value Conv2dBackwardData(napi_env env, napi_callback_info info) {
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
  if (isPointwise(&g)) {
    /* dx[total×C] = dy[total×F] · wᵀ (w is C×F) */
    gemm(false, true, total, K, g.F, 1.0f, dy, w, 0.0f, dx);
    return NULL;
  }
  memset(dx, 0, (size_t)xLen * sizeof(float));
  if (total == 0 || K == 0) return NULL;
  Instance *inst = instance(env);
  const int64_t step = chunkRows(inst, K, total);
  float *col = scratch(env, inst, (size_t)(step * K) * sizeof(float));
  if (!col) return NULL;
  for (int64_t r0 = 0; r0 < total; r0 += step) {
    const int64_t rows = total - r0 < step ? total - r0 : step;
    /* dcol[rows×K] = dy[rows×F] · wᵀ */
    gemm(false, true, rows, K, g.F, 1.0f, dy + r0 * g.F, w, 0.0f, col);
    col2imAdd(&g, col, r0, rows, dx);
  }
  return NULL;
}

/* conv2dBackwardFilter(x, dy, dw, db | null, N, H, W, C, KH, KW, F, sh, sw, pt, pl, OH, OW): dw, db += */
static napi_value Conv2dBackwardFilter(napi_env env, napi_callback_info info) {
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
  if (db && g.F > 0) {
    /* db[f] += Σ_r dy[r, f], summed in double (tens of thousands of rows per call). */
    double *acc = calloc((size_t)g.F, sizeof(double));
    if (!acc) { napi_throw_range_error(env, NULL, "conv2dBackwardFilter: out of memory"); return NULL; }
    for (int64_t r = 0; r < total; r++) {
      const float *row = dy + r * g.F;
      for (int64_t f = 0; f < g.F; f++) acc[f] += row[f];
    }
    for (int64_t f = 0; f < g.F; f++) db[f] = (float)(db[f] + acc[f]);
    free(acc);
  }
  if (total == 0 || K == 0 || g.F == 0) return NULL;
  if (isPointwise(&g)) {
    gemm(true, false, K, g.F, total, 1.0f, x, dy, 1.0f, dw);
    return NULL;
  }
  Instance *inst = instance(env);
  const int64_t step = chunkRows(inst, K, total);
  float *col = scratch(env, inst, (size_t)(step * K) * sizeof(float));
  if (!col) return NULL;
  for (int64_t r0 = 0; r0 < total; r0 += step) {
    const int64_t rows = total - r0 < step ? total - r0 : step;
    im2col(&g, x, r0, rows, col);
    /* dw[K×F] += colᵀ · dy[rows×F] */
    gemm(true, false, K, g.F, rows, 1.0f, col, dy + r0 * g.F, 1.0f, dw);
  }
  return NULL;
}

/* ------------------------------------------------------------------ configuration */

/* setConvChunkBytes(bytes): target size of one im2col chunk (benchmarks tune it). */
static napi_value SetConvChunkBytes(napi_env env, napi_callback_info info) {
  napi_value argv[1];
  int64_t bytes;
  if (!getArgs(env, info, 1, argv, "setConvChunkBytes(bytes)")) return NULL;
  if (!getInts(env, argv, 1, "setConvChunkBytes", NULL, &bytes)) return NULL;
  instance(env)->chunkBytes = bytes < MIN_CHUNK_BYTES ? MIN_CHUNK_BYTES : (size_t)bytes;
  return NULL;
}

/* blasThreads(n?): sets OpenBLAS's thread count when n is given; returns the current count. */
static napi_value BlasThreads(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1];
  CHECK(napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  if (argc >= 1) {
    int64_t n;
    if (!getInts(env, argv, 1, "blasThreads", NULL, &n)) return NULL;
    if (n >= 1) openblas_set_num_threads((int)n);
  }
  napi_value out;
  CHECK(napi_create_int32(env, openblas_get_num_threads(), &out));
  return out;
}

static bool setString(napi_env env, napi_value obj, const char *key, const char *value) {
  napi_value v;
  return napi_create_string_utf8(env, value ? value : "", NAPI_AUTO_LENGTH, &v) == napi_ok &&
         napi_set_named_property(env, obj, key, v) == napi_ok;
}

/* info(): { config, corename, parallel: 'sequential' | 'pthread' | 'openmp', threads } */
static napi_value Info(napi_env env, napi_callback_info info) {
  (void)info;
  napi_value obj, threads;
  CHECK(napi_create_object(env, &obj));
  const int p = openblas_get_parallel();
  const char *parallel = p == 0 ? "sequential" : p == 1 ? "pthread" : p == 2 ? "openmp" : "unknown";
  if (!setString(env, obj, "config", openblas_get_config()) || !setString(env, obj, "corename", openblas_get_corename()) ||
      !setString(env, obj, "parallel", parallel)) { throwLast(env, "info"); return NULL; }
  CHECK(napi_create_int32(env, openblas_get_num_threads(), &threads));
  CHECK(napi_set_named_property(env, obj, "threads", threads));
  return obj;
}

/* ------------------------------------------------------------------ module */

static void freeInstance(napi_env env, void *data, void *hint) {
  (void)env; (void)hint;
  Instance *inst = data;
  free(inst->col);
  free(inst->apack);
  free(inst);
}

NAPI_MODULE_INIT(/* napi_env env, napi_value exports */) {
  /* One BLAS thread: paratrain's parallelism is one device (thread or process) per core. */
  openblas_set_num_threads(1);

  Instance *inst = calloc(1, sizeof(Instance));
  if (!inst) { napi_throw_error(env, NULL, "paratrain_native: out of memory"); return NULL; }
  inst->chunkBytes = DEFAULT_CHUNK_BYTES;
  if (napi_set_instance_data(env, inst, freeInstance, NULL) != napi_ok) { free(inst); throwLast(env, "init"); return NULL; }

  const napi_property_descriptor props[] = {
    { "sgemm", NULL, Sgemm, NULL, NULL, NULL, napi_enumerable, NULL },
    { "conv2dForward", NULL, Conv2dForward, NULL, NULL, NULL, napi_enumerable, NULL },
    { "conv2dBackwardData", NULL, Conv2dBackwardData, NULL, NULL, NULL, napi_enumerable, NULL },
    { "conv2dBackwardFilter", NULL, Conv2dBackwardFilter, NULL, NULL, NULL, napi_enumerable, NULL },
    { "setConvChunkBytes", NULL, SetConvChunkBytes, NULL, NULL, NULL, napi_enumerable, NULL },
    { "blasThreads", NULL, BlasThreads, NULL, NULL, NULL, napi_enumerable, NULL },
    { "info", NULL, Info, NULL, NULL, NULL, napi_enumerable, NULL },
    { "packedKernel", NULL, PackedKernel, NULL, NULL, NULL, napi_enumerable, NULL },
    { "packedLength", NULL, PackedLength, NULL, NULL, NULL, napi_enumerable, NULL },
    { "packB", NULL, PackB, NULL, NULL, NULL, napi_enumerable, NULL },
    { "gemmPacked", NULL, GemmPacked, NULL, NULL, NULL, napi_enumerable, NULL },
  };
  CHECK(napi_define_properties(env, exports, sizeof props / sizeof props[0], props));
  return exports;
}
