/*
 * paratrain_tcp: the optional native data path of the tcp transport (Node-API, plain C, no library).
 *
 * The same two operations as src/comm/tcp/kernel.wat, but on any memory: wasm can only touch its
 * own linear memory, so the wasm path copies the caller's floats in and out (three extra passes
 * over every reduced byte); here they are read and written where they are.
 *
 *   hash(lanes, data)          feeds the whole 64-byte stripes of `data` into the 16 u32 lanes of
 *                              the "ptr32" payload hash (lane j takes word j of every stripe:
 *                              acc = rotl(acc + w·P2, 13)·P1); the tail and the final mix stay in JS
 *   addHash(dst, src, div, lanes|null)
 *                              dst[i] = f32(dst[i] + src[i]), then f32(· / div) when div != 0, and
 *                              (lanes given) the result's whole stripes fed into lanes: the reduce
 *                              step and the checksum of the frame it forwards, in one pass
 *
 * Results are bit-identical to the wasm kernel: float32 add and divide are exact IEEE operations
 * and nothing is reassociated (no -ffast-math), so ranks with and without this addon interoperate.
 * x86-64 gets an AVX2 clone chosen at load time (target_clones); elsewhere GCC's generic vectors.
 * Every array may be a view at any byteOffset; lengths are checked before memory is touched.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <node_api.h>

#define P1 2654435761u
#define P2 2246822519u

typedef uint32_t u32x8 __attribute__((vector_size(32)));
typedef float f32x8 __attribute__((vector_size(32)));

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define CLONES __attribute__((target_clones("avx2", "default")))
#else
#define CLONES
#endif

static inline __attribute__((always_inline)) u32x8 round8(u32x8 acc, u32x8 w) {
  u32x8 t = acc + w * P2;
  return ((t << 13) | (t >> 19)) * P1;
}

/* n bytes (a multiple of 64) at p into lanes[16]. */
CLONES static void hash_stripes(uint32_t *lanes, const uint8_t *p, size_t n) {
  u32x8 a, b, w0, w1;
  memcpy(&a, lanes, 32);
  memcpy(&b, lanes + 8, 32);
  for (const uint8_t *end = p + n; p < end; p += 64) {
    memcpy(&w0, p, 32);
    memcpy(&w1, p + 32, 32);
    a = round8(a, w0);
    b = round8(b, w1);
  }
  memcpy(lanes, &a, 32);
  memcpy(lanes + 8, &b, 32);
}

/* dst[i] = f32(dst[i] + src[i]) (/ div when div != 0) for n floats; the whole stripes of the result into lanes when given. */
CLONES static void add_hash(float *dst, const float *src, size_t n, float div, uint32_t *lanes) {
  u32x8 a = {0}, b = {0};
  if (lanes) {
    memcpy(&a, lanes, 32);
    memcpy(&b, lanes + 8, 32);
  }
  f32x8 dv = {div, div, div, div, div, div, div, div};
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    f32x8 x0, x1, y0, y1;
    memcpy(&x0, dst + i, 32);
    memcpy(&x1, dst + i + 8, 32);
    memcpy(&y0, src + i, 32);
    memcpy(&y1, src + i + 8, 32);
    x0 += y0;
    x1 += y1;
    if (div != 0.0f) {
      x0 /= dv;
      x1 /= dv;
    }
    memcpy(dst + i, &x0, 32);
    memcpy(dst + i + 8, &x1, 32);
    if (lanes) {
      u32x8 w0, w1;
      memcpy(&w0, &x0, 32);
      memcpy(&w1, &x1, 32);
      a = round8(a, w0);
      b = round8(b, w1);
    }
  }
  for (; i < n; i++) {
    float s = dst[i] + src[i];
    dst[i] = div != 0.0f ? s / div : s;
  }
  if (lanes) {
    memcpy(lanes, &a, 32);
    memcpy(lanes + 8, &b, 32);
  }
}

/* ------------------------------------------------------------------ Node-API glue */

static napi_value throw_range(napi_env env, const char *msg) {
  napi_throw_range_error(env, NULL, msg);
  return NULL;
}

/* A typed array's data pointer (already advanced by its byteOffset) and byte length; NULL after throwing. */
static void *bytes_of(napi_env env, napi_value v, size_t *bytes, const char *what) {
  bool is = false;
  napi_is_typedarray(env, v, &is);
  if (!is) {
    char msg[96];
    snprintf(msg, sizeof msg, "paratrain_tcp: %s must be a typed array", what);
    napi_throw_type_error(env, NULL, msg);
    return NULL;
  }
  napi_typedarray_type type;
  size_t length;
  void *data;
  napi_value ab;
  size_t offset;
  if (napi_get_typedarray_info(env, v, &type, &length, &data, &ab, &offset) != napi_ok) {
    napi_throw_error(env, NULL, "paratrain_tcp: cannot read a typed array");
    return NULL;
  }
  size_t elem = 1;
  switch (type) {
    case napi_int16_array: case napi_uint16_array: elem = 2; break;
    case napi_int32_array: case napi_uint32_array: case napi_float32_array: elem = 4; break;
    case napi_float64_array: case napi_bigint64_array: case napi_biguint64_array: elem = 8; break;
    default: elem = 1;
  }
  *bytes = length * elem;
  /* a zero-length view may carry a NULL pointer; any non-NULL address does for it */
  return data ? data : (void *)bytes;
}

static uint32_t *lanes_of(napi_env env, napi_value v) {
  size_t bytes;
  uint32_t *lanes = bytes_of(env, v, &bytes, "lanes");
  if (!lanes) return NULL;
  if (bytes != 64) {
    throw_range(env, "paratrain_tcp: lanes must be 16 uint32 (64 bytes)");
    return NULL;
  }
  return lanes;
}

/* The first n arguments into argv; false (after throwing `usage`) when fewer were passed. */
static bool get_args(napi_env env, napi_callback_info info, size_t n, napi_value *argv, const char *usage) {
  size_t argc = n;
  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  if (argc >= n) return true;
  throw_range(env, usage);
  return false;
}

/* hash(lanes: Uint32Array(16), data: TypedArray): void */
static napi_value js_hash(napi_env env, napi_callback_info info) {
  napi_value argv[2];
  if (!get_args(env, info, 2, argv, "paratrain_tcp: hash(lanes, data)")) return NULL;
  uint32_t *lanes = lanes_of(env, argv[0]);
  if (!lanes) return NULL;
  size_t n;
  const uint8_t *p = bytes_of(env, argv[1], &n, "data");
  if (!p) return NULL;
  hash_stripes(lanes, p, n & ~(size_t)63);
  return NULL;
}

/* addHash(dst: Float32Array, src: TypedArray, div: number, lanes: Uint32Array | null): void */
static napi_value js_add_hash(napi_env env, napi_callback_info info) {
  napi_value argv[4];
  if (!get_args(env, info, 4, argv, "paratrain_tcp: addHash(dst, src, div, lanes)")) return NULL;
  size_t dn, sn;
  float *dst = bytes_of(env, argv[0], &dn, "dst");
  if (!dst) return NULL;
  const float *src = bytes_of(env, argv[1], &sn, "src");
  if (!src) return NULL;
  if (dn % 4 != 0 || sn < dn) return throw_range(env, "paratrain_tcp: addHash needs whole floats and src at least as long as dst");
  if (((uintptr_t)dst | (uintptr_t)src) % 4 != 0) return throw_range(env, "paratrain_tcp: addHash needs 4-byte aligned arrays");
  double div;
  if (napi_get_value_double(env, argv[2], &div) != napi_ok) return throw_range(env, "paratrain_tcp: div must be a number");
  napi_valuetype lt;
  napi_typeof(env, argv[3], &lt);
  uint32_t *lanes = NULL;
  if (lt != napi_null && lt != napi_undefined) {
    lanes = lanes_of(env, argv[3]);
    if (!lanes) return NULL;
  }
  add_hash(dst, src, dn / 4, (float)div, lanes);
  return NULL;
}

static napi_value init(napi_env env, napi_value exports) {
  napi_property_descriptor props[] = {
    { "hash", NULL, js_hash, NULL, NULL, NULL, napi_default, NULL },
    { "addHash", NULL, js_add_hash, NULL, NULL, NULL, napi_default, NULL },
  };
  napi_define_properties(env, exports, sizeof props / sizeof props[0], props);
  return exports;
}

NAPI_MODULE(NODE_GYP_MODULE_NAME, init)
