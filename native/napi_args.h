/*
 * Reading and checking the arguments of a kernel call, shared by paratrain's kernel addons (the
 * OpenBLAS one, native/paratrain_native.c and recurrent.c, and the onednn one, native/onednn/), so
 * both say the same about the same mistake. Header-only (static inline): each addon is one .node file of its own.
 *
 * Every array may be a view at any byteOffset into an ArrayBuffer or a SharedArrayBuffer
 * (including a shared WebAssembly.Memory): napi_get_typedarray_info returns the data pointer
 * already advanced by the view's byteOffset. Lengths are checked (in 64-bit arithmetic) before any
 * memory is touched: a short array is a RangeError, never an out-of-bounds access. Errors name the
 * function and the argument ("gemm: size M must be a non-negative integer", "conv2dForward: x has
 * 15 values, needs 16").
 */
#ifndef PARATRAIN_NAPI_ARGS_H
#define PARATRAIN_NAPI_ARGS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <node_api.h>

/* Throws N-API's last error (unless an exception is already pending). */
static inline void throwLast(napi_env env, const char *what) {
  const napi_extended_error_info *info = NULL;
  napi_get_last_error_info(env, &info);
  bool pending = false;
  napi_is_exception_pending(env, &pending);
  if (pending) return;
  napi_throw_error(env, NULL, info && info->error_message ? info->error_message : what);
}

#define CHECK(call)                                                            \
  do {                                                                         \
    if ((call) != napi_ok) { throwLast(env, #call); return NULL; }            \
  } while (0)

static inline bool getTyped(napi_env env, napi_value v, const char *fn, const char *name, bool nullable,
                            napi_typedarray_type want, const char *typeName, void **data, size_t *length) {
  napi_valuetype t;
  if (napi_typeof(env, v, &t) != napi_ok) { throwLast(env, fn); return false; }
  if (nullable && (t == napi_null || t == napi_undefined)) { *data = NULL; *length = 0; return true; }
  bool isTyped = false;
  napi_is_typedarray(env, v, &isTyped);
  napi_typedarray_type type;
  void *ptr = NULL;
  size_t len = 0;
  if (!isTyped || napi_get_typedarray_info(env, v, &type, &len, &ptr, NULL, NULL) != napi_ok || type != want) {
    char msg[160];
    snprintf(msg, sizeof msg, "%s: %s must be %s%s", fn, name, typeName, nullable ? " or null" : "");
    napi_throw_type_error(env, NULL, msg);
    return false;
  }
  *data = ptr;
  *length = len;
  return true;
}

/* `v` as a Float32Array (or null when `nullable`); false after throwing. */
static inline bool getF32(napi_env env, napi_value v, const char *fn, const char *name, bool nullable, float **data, size_t *length) {
  return getTyped(env, v, fn, name, nullable, napi_float32_array, "a Float32Array", (void **)data, length);
}

/* `v` as an Int32Array; false after throwing. */
static inline bool getI32(napi_env env, napi_value v, const char *fn, const char *name, int32_t **data, size_t *length) {
  return getTyped(env, v, fn, name, false, napi_int32_array, "an Int32Array", (void **)data, length);
}

/* n non-negative 32-bit integers; `names` (e.g. "size M", "geometry field OH"), or NULL for "argument i", name them in the error. */
static inline bool getInts(napi_env env, napi_value *argv, int n, const char *fn, const char *const *names, int64_t *out) {
  for (int i = 0; i < n; i++) {
    double d;
    if (napi_get_value_double(env, argv[i], &d) != napi_ok || !(d >= 0 && d <= 2147483647.0) || d != (double)(int64_t)d) {
      char msg[160];
      if (names) snprintf(msg, sizeof msg, "%s: %s must be a non-negative integer", fn, names[i]);
      else snprintf(msg, sizeof msg, "%s: argument %d must be a non-negative 32-bit integer", fn, i + 1);
      napi_throw_range_error(env, NULL, msg);
      return false;
    }
    out[i] = (int64_t)d;
  }
  return true;
}

static inline bool getNumber(napi_env env, napi_value v, const char *fn, const char *name, double *out) {
  if (napi_get_value_double(env, v, out) != napi_ok) {
    char msg[160];
    snprintf(msg, sizeof msg, "%s: %s must be a number", fn, name);
    napi_throw_type_error(env, NULL, msg);
    return false;
  }
  return true;
}

/* A RangeError unless have ≥ want. */
static inline bool need(napi_env env, const char *fn, const char *name, size_t have, int64_t want) {
  if ((int64_t)have >= want) return true;
  char msg[200];
  snprintf(msg, sizeof msg, "%s: %s has %zu values, needs %lld", fn, name, have, (long long)want);
  napi_throw_range_error(env, NULL, msg);
  return false;
}

/* Exactly `want` arguments into argv; `usage` is the call's signature for the error. */
static inline bool getArgs(napi_env env, napi_callback_info info, size_t want, napi_value *argv, const char *usage) {
  size_t argc = want;
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok) { throwLast(env, usage); return false; }
  if (argc != want) {
    char msg[240];
    snprintf(msg, sizeof msg, "expected %zu arguments: %s", want, usage);
    napi_throw_type_error(env, NULL, msg);
    return false;
  }
  return true;
}

static inline napi_value boolValue(napi_env env, bool b) {
  napi_value v = NULL;
  napi_get_boolean(env, b, &v);
  return v;
}

static inline napi_value numberValue(napi_env env, double d) {
  napi_value v = NULL;
  napi_create_double(env, d, &v);
  return v;
}

/* ------------------------------------------------------------------ gemm */

/* gemm's arguments: C[M×N] = alpha·op(A)·op(B) + beta·C, row-major and packed. */
typedef struct {
  bool ta, tb;
  int64_t M, N, K;
  float alpha, beta;
  float *A, *B, *C;
} GemmArgs;

/* sgemm(transA, transB, M, N, K, alpha, A, B, beta, C), every operand long enough; false after throwing. */
static inline bool getGemmArgs(napi_env env, napi_callback_info info, GemmArgs *a) {
  const char *fn = "gemm";
  napi_value argv[10];
  if (!getArgs(env, info, 10, argv, "sgemm(transA, transB, M, N, K, alpha, A, B, beta, C)")) return false;
  if (napi_get_value_bool(env, argv[0], &a->ta) != napi_ok || napi_get_value_bool(env, argv[1], &a->tb) != napi_ok) {
    napi_throw_type_error(env, NULL, "gemm: transA and transB must be booleans");
    return false;
  }
  static const char *const names[] = { "size M", "size N", "size K" };
  int64_t s[3];
  if (!getInts(env, argv + 2, 3, fn, names, s)) return false;
  a->M = s[0]; a->N = s[1]; a->K = s[2];
  double alpha, beta;
  size_t la, lb, lc;
  if (!getNumber(env, argv[5], fn, "alpha", &alpha) || !getNumber(env, argv[8], fn, "beta", &beta)) return false;
  if (!getF32(env, argv[6], fn, "A", false, &a->A, &la) || !getF32(env, argv[7], fn, "B", false, &a->B, &lb) ||
      !getF32(env, argv[9], fn, "C", false, &a->C, &lc)) return false;
  if (!need(env, fn, "A", la, a->M * a->K) || !need(env, fn, "B", lb, a->K * a->N) || !need(env, fn, "C", lc, a->M * a->N)) return false;
  a->alpha = (float)alpha;
  a->beta = (float)beta;
  return true;
}

/* ------------------------------------------------------------------ window geometry */

/** A conv or pool geometry (F = 1 for pooling); pb/pr: the padding after, implied by OH/OW (negative when the last rows/columns are unused). */
typedef struct {
  int64_t N, H, W, C, KH, KW, F, sh, sw, pt, pl, OH, OW, pb, pr;
} Geom;

/* a·b for 0 ≤ a, b ≤ 2^31, saturated at 2^31 so chained products cannot overflow. */
static inline int64_t mulSat(int64_t a, int64_t b) {
  const int64_t p = a * b;
  return p > (int64_t)INT32_MAX ? (int64_t)INT32_MAX + 1 : p;
}

/* Reads 13 (conv: N, H, W, C, KH, KW, F, sh, sw, pt, pl, OH, OW) or 12 (pool: no F) integers from argv and checks them; false after throwing. */
static inline bool getGeom(napi_env env, napi_value *argv, const char *fn, bool conv, Geom *g) {
  static const char *const convNames[] = { "geometry field N", "geometry field H", "geometry field W", "geometry field C",
    "geometry field KH", "geometry field KW", "geometry field F", "geometry field strideH", "geometry field strideW",
    "geometry field padTop", "geometry field padLeft", "geometry field OH", "geometry field OW" };
  static const char *const poolNames[] = { "geometry field N", "geometry field H", "geometry field W", "geometry field C",
    "geometry field KH", "geometry field KW", "geometry field strideH", "geometry field strideW",
    "geometry field padTop", "geometry field padLeft", "geometry field OH", "geometry field OW" };
  int64_t v[13];
  if (conv) {
    if (!getInts(env, argv, 13, fn, convNames, v)) return false;
  } else {
    if (!getInts(env, argv, 12, fn, poolNames, v)) return false;
    for (int i = 12; i > 6; i--) v[i] = v[i - 1];
    v[6] = 1;
  }
  *g = (Geom){ v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7], v[8], v[9], v[10], v[11], v[12], 0, 0 };
  if (g->sh < 1 || g->sw < 1) {
    char msg[100];
    snprintf(msg, sizeof msg, "%s: strides must be >= 1", fn);
    napi_throw_range_error(env, NULL, msg);
    return false;
  }
  const int64_t K = mulSat(mulSat(g->KH, g->KW), g->C), rows = mulSat(mulSat(g->N, g->OH), g->OW);
  if (K > INT32_MAX || rows > INT32_MAX || mulSat(K, g->F) > INT32_MAX || mulSat(rows, g->F) > INT32_MAX ||
      mulSat(rows, g->C) > INT32_MAX || mulSat(mulSat(mulSat(g->N, g->H), g->W), g->C) > INT32_MAX) {
    char msg[100];
    snprintf(msg, sizeof msg, "%s: the layer is too large (over 2^31 values in one operand)", fn);
    napi_throw_range_error(env, NULL, msg);
    return false;
  }
  g->pb = (g->OH - 1) * g->sh + g->KH - g->H - g->pt;
  g->pr = (g->OW - 1) * g->sw + g->KW - g->W - g->pl;
  return true;
}

#endif
