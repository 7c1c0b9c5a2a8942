/*
 * N-API argument helpers of the onednn addon. Every array may be a view at any byteOffset into an
 * ArrayBuffer or a SharedArrayBuffer (including a shared WebAssembly.Memory):
 * napi_get_typedarray_info returns the data pointer already advanced by the view's byteOffset.
 * Lengths are checked (in 64-bit arithmetic) before any memory is touched: a short array is a
 * RangeError, never an out-of-bounds access.
 */
#include <stdio.h>
#include <oneapi/dnnl/dnnl_debug.h>
#include "onednn.h"

void throwLast(napi_env env, const char *what) {
  const napi_extended_error_info *info = NULL;
  napi_get_last_error_info(env, &info);
  bool pending = false;
  napi_is_exception_pending(env, &pending);
  if (pending) return;
  napi_throw_error(env, NULL, info && info->error_message ? info->error_message : what);
}

void throwStatus(napi_env env, const char *fn, const char *what, dnnl_status_t s) {
  char msg[200];
  snprintf(msg, sizeof msg, "%s: oneDNN %s failed (%s)", fn, what, dnnl_status2str(s));
  napi_throw_error(env, NULL, msg);
}

static bool getTyped(napi_env env, napi_value v, const char *fn, const char *name, bool nullable,
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

bool getF32(napi_env env, napi_value v, const char *fn, const char *name, bool nullable, float **data, size_t *length) {
  return getTyped(env, v, fn, name, nullable, napi_float32_array, "a Float32Array", (void **)data, length);
}

bool getI32(napi_env env, napi_value v, const char *fn, const char *name, int32_t **data, size_t *length) {
  return getTyped(env, v, fn, name, false, napi_int32_array, "an Int32Array", (void **)data, length);
}

bool getInts(napi_env env, napi_value *argv, int n, const char *fn, const char *const *names, int64_t *out) {
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

bool getNumber(napi_env env, napi_value v, const char *fn, const char *name, double *out) {
  if (napi_get_value_double(env, v, out) != napi_ok) {
    char msg[160];
    snprintf(msg, sizeof msg, "%s: %s must be a number", fn, name);
    napi_throw_type_error(env, NULL, msg);
    return false;
  }
  return true;
}

bool need(napi_env env, const char *fn, const char *name, size_t have, int64_t want) {
  if ((int64_t)have >= want) return true;
  char msg[200];
  snprintf(msg, sizeof msg, "%s: %s has %zu values, needs %lld", fn, name, have, (long long)want);
  napi_throw_range_error(env, NULL, msg);
  return false;
}

bool getArgs(napi_env env, napi_callback_info info, size_t want, napi_value *argv, const char *usage) {
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

napi_value boolValue(napi_env env, bool b) {
  napi_value v = NULL;
  napi_get_boolean(env, b, &v);
  return v;
}

napi_value numberValue(napi_env env, double d) {
  napi_value v = NULL;
  napi_create_double(env, d, &v);
  return v;
}

/* a·b for 0 ≤ a, b ≤ 2^31, saturated at 2^31 so chained products cannot overflow. */
static inline int64_t mul(int64_t a, int64_t b) {
  const int64_t p = a * b;
  return p > (int64_t)INT32_MAX ? (int64_t)INT32_MAX + 1 : p;
}

bool getGeom(napi_env env, napi_value *argv, const char *fn, bool conv, Geom *g) {
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
  const int64_t K = mul(mul(g->KH, g->KW), g->C), rows = mul(mul(g->N, g->OH), g->OW);
  if (K > INT32_MAX || rows > INT32_MAX || mul(K, g->F) > INT32_MAX || mul(rows, g->F) > INT32_MAX ||
      mul(rows, g->C) > INT32_MAX || mul(mul(mul(g->N, g->H), g->W), g->C) > INT32_MAX) {
    char msg[100];
    snprintf(msg, sizeof msg, "%s: the layer is too large (over 2^31 values in one operand)", fn);
    napi_throw_range_error(env, NULL, msg);
    return false;
  }
  /* The padding after, implied by the output size; negative when the last rows/columns are unused. */
  g->pb = (g->OH - 1) * g->sh + g->KH - g->H - g->pt;
  g->pr = (g->OW - 1) * g->sw + g->KW - g->W - g->pl;
  return true;
}
