/*
 * paratrain_shm: the shm transport's optional native reduction (Node-API, plain C, no library).
 *
 *   reduce(srcs, dsts, start, n, div)
 *     srcs, dsts: arrays of Float32Arrays (every rank's registered buffer, or some of them); for
 *     every i in [start, start + n):
 *       acc = srcs[0][i]; acc = f32(acc + srcs[k][i]) for k = 1 … in order;
 *       if div != 0: acc = f32(acc / div);  dsts[d][i] = acc for every d.
 *
 * The same arithmetic, in the same order, as the wasm kernel (src/comm/shm/reduceKernel.wat), so
 * the results are bit-identical whichever kernel ran. Why a second kernel: wasm's vectors are 128
 * bits, and a reduction in cache is bound by its stores, two per result (src/comm/shm/nativeReduce.ts
 * has the figures); with AVX2 each store moves 32 bytes. And wasm reaches only its own memory, so
 * buffers outside the arena went through scratch copies; here every buffer is read and written
 * where it is. Sources and destinations may be the same arrays (an allreduce in place): each step
 * loads its 32 floats from every source before it stores them.
 *
 *   isa()          the kernel reduce runs: "avx2" or "plain" (portable C)
 *   setIsa(name)   "plain" forces the portable kernel, "best" restores the default (for tests)
 *
 * Arrays may be views at any byteOffset into ArrayBuffers or SharedArrayBuffers (a shared
 * WebAssembly.Memory included). Every array is checked (a Float32Array holding start + n values)
 * before any memory is touched.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <node_api.h>
#include "../napi_args.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define HAVE_X86 1
#endif

/* at most this many sources or destinations (an shm world has at most 256 ranks: createShmWorld) */
#define MAX_ARRAYS 256

/* 32 floats at a time from ns sources into nd destinations; a scalar tail. */
#ifdef HAVE_X86
__attribute__((target("avx2")))
static void reduce_avx2(float *const *src, int ns, float *const *dst, int nd, size_t n, float div) {
  const __m256 vd = _mm256_set1_ps(div);
  size_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const float *s0 = src[0] + i;
    __m256 x0 = _mm256_loadu_ps(s0), x1 = _mm256_loadu_ps(s0 + 8), x2 = _mm256_loadu_ps(s0 + 16), x3 = _mm256_loadu_ps(s0 + 24);
    for (int k = 1; k < ns; k++) {
      const float *s = src[k] + i;
      x0 = _mm256_add_ps(x0, _mm256_loadu_ps(s)); x1 = _mm256_add_ps(x1, _mm256_loadu_ps(s + 8));
      x2 = _mm256_add_ps(x2, _mm256_loadu_ps(s + 16)); x3 = _mm256_add_ps(x3, _mm256_loadu_ps(s + 24));
    }
    if (div != 0) { x0 = _mm256_div_ps(x0, vd); x1 = _mm256_div_ps(x1, vd); x2 = _mm256_div_ps(x2, vd); x3 = _mm256_div_ps(x3, vd); }
    for (int d = 0; d < nd; d++) {
      float *o = dst[d] + i;
      _mm256_storeu_ps(o, x0); _mm256_storeu_ps(o + 8, x1); _mm256_storeu_ps(o + 16, x2); _mm256_storeu_ps(o + 24, x3);
    }
  }
  for (; i < n; i++) {
    float acc = src[0][i];
    for (int k = 1; k < ns; k++) acc += src[k][i];
    if (div != 0) acc /= div;
    for (int d = 0; d < nd; d++) dst[d][i] = acc;
  }
}
#endif

/* The portable kernel: blocks of 16 so each block's loads precede its stores (the compiler vectorises it). */
static void reduce_plain(float *const *src, int ns, float *const *dst, int nd, size_t n, float div) {
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    float acc[16];
    for (int j = 0; j < 16; j++) acc[j] = src[0][i + j];
    for (int k = 1; k < ns; k++) for (int j = 0; j < 16; j++) acc[j] += src[k][i + j];
    if (div != 0) for (int j = 0; j < 16; j++) acc[j] /= div;
    for (int d = 0; d < nd; d++) for (int j = 0; j < 16; j++) dst[d][i + j] = acc[j];
  }
  for (; i < n; i++) {
    float acc = src[0][i];
    for (int k = 1; k < ns; k++) acc += src[k][i];
    if (div != 0) acc /= div;
    for (int d = 0; d < nd; d++) dst[d][i] = acc;
  }
}

static bool cpu_has_avx2(void) {
#ifdef HAVE_X86
  return __builtin_cpu_supports("avx2");
#else
  return false;
#endif
}

/* the portable kernel on request (setIsa, for tests and comparisons); else AVX2 where the CPU has it */
static bool plain_requested = false;

static bool use_avx2(void) {
  return !plain_requested && cpu_has_avx2();
}

/* Reads a JS array of Float32Arrays, each holding at least `need_len` values; its count, or -1 after throwing. */
static int get_arrays(napi_env env, napi_value v, const char *name, int64_t need_len, float **out) {
  bool is = false;
  uint32_t len = 0;
  if (napi_is_array(env, v, &is) != napi_ok || !is || napi_get_array_length(env, v, &len) != napi_ok) {
    char msg[96];
    snprintf(msg, sizeof msg, "reduce: %s must be an array of Float32Arrays", name);
    napi_throw_type_error(env, NULL, msg);
    return -1;
  }
  if (len < 1 || len > MAX_ARRAYS) {
    char msg[96];
    snprintf(msg, sizeof msg, "reduce: %s must hold 1 to %d arrays, not %u", name, MAX_ARRAYS, len);
    napi_throw_range_error(env, NULL, msg);
    return -1;
  }
  for (uint32_t k = 0; k < len; k++) {
    napi_value e;
    char what[48];
    snprintf(what, sizeof what, "%s[%u]", name, k);
    size_t have = 0;
    if (napi_get_element(env, v, k, &e) != napi_ok) { throwLast(env, "reduce"); return -1; }
    if (!getF32(env, e, "reduce", what, false, &out[k], &have) || !need(env, "reduce", what, have, need_len)) return -1;
  }
  return (int)len;
}

/* reduce(srcs: Float32Array[], dsts: Float32Array[], start: number, n: number, div: number): void */
static napi_value js_reduce(napi_env env, napi_callback_info info) {
  napi_value argv[5];
  if (!getArgs(env, info, 5, argv, "reduce(srcs, dsts, start, n, div)")) return NULL;
  static const char *const names[] = { "start", "n" };
  int64_t range[2];
  double div;
  if (!getInts(env, argv + 2, 2, "reduce", names, range) || !getNumber(env, argv[4], "reduce", "div", &div)) return NULL;
  float *src[MAX_ARRAYS], *dst[MAX_ARRAYS];
  const int ns = get_arrays(env, argv[0], "srcs", range[0] + range[1], src);
  if (ns < 0) return NULL;
  const int nd = get_arrays(env, argv[1], "dsts", range[0] + range[1], dst);
  if (nd < 0) return NULL;
  for (int k = 0; k < ns; k++) src[k] += range[0];
  for (int d = 0; d < nd; d++) dst[d] += range[0];
#ifdef HAVE_X86
  if (use_avx2()) { reduce_avx2(src, ns, dst, nd, (size_t)range[1], (float)div); return NULL; }
#endif
  reduce_plain(src, ns, dst, nd, (size_t)range[1], (float)div);
  return NULL;
}

/* isa(): the instruction set reduce runs with ("avx2" or "plain") */
static napi_value js_isa(napi_env env, napi_callback_info info) {
  napi_value s;
  napi_create_string_utf8(env, use_avx2() ? "avx2" : "plain", NAPI_AUTO_LENGTH, &s);
  return s;
}

/* setIsa(name: "plain" | "best"): "plain" runs the portable kernel, "best" the widest the CPU has; returns isa() */
static napi_value js_set_isa(napi_env env, napi_callback_info info) {
  napi_value argv[1];
  if (!getArgs(env, info, 1, argv, "setIsa(\"plain\" | \"best\")")) return NULL;
  char name[8] = { 0 };
  size_t len = 0;
  if (napi_get_value_string_utf8(env, argv[0], name, sizeof name, &len) != napi_ok || (strcmp(name, "plain") != 0 && strcmp(name, "best") != 0)) {
    napi_throw_type_error(env, NULL, "setIsa: the name must be \"plain\" or \"best\"");
    return NULL;
  }
  plain_requested = strcmp(name, "plain") == 0;
  return js_isa(env, info);
}

NAPI_MODULE_INIT() {
  napi_property_descriptor props[] = {
    { "reduce", NULL, js_reduce, NULL, NULL, NULL, napi_default, NULL },
    { "isa", NULL, js_isa, NULL, NULL, NULL, napi_default, NULL },
    { "setIsa", NULL, js_set_isa, NULL, NULL, NULL, napi_default, NULL },
  };
  napi_define_properties(env, exports, sizeof props / sizeof props[0], props);
  return exports;
}
