/* What the addon's source files share: the per-environment scratch and the argument helpers
 * (defined in paratrain_native.c), and the N-API entry points of recurrent.c. */
#ifndef PARATRAIN_NATIVE_H
#define PARATRAIN_NATIVE_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdbool.h>
#include <node_api.h>

/* Per Node environment (main thread, each worker): scratch buffers that grow on demand. */
typedef struct {
  float *col;          /* im2col chunks of the convolutions */
  size_t colBytes;
  size_t chunkBytes;
  float *apack;        /* packed A panels of gemmPacked */
  size_t apackBytes;
} Instance;

#define CHECK(call)                                                            \
  do {                                                                         \
    if ((call) != napi_ok) { throwLast(env, #call); return NULL; }            \
  } while (0)

/* Shared between this addon's files only, never exported from the .node library. */
#pragma GCC visibility push(hidden)

void throwLast(napi_env env, const char *what);
/* Argument `v` as a Float32Array (or null when `nullable`); false after throwing. */
bool getF32(napi_env env, napi_value v, const char *fn, const char *name, bool nullable, float **data, size_t *length);
/* n non-negative 32-bit integers; `names` (or NULL) names them in the error. */
bool getInts(napi_env env, napi_value *argv, int n, const char *fn, const char *const *names, int64_t *out);
bool getNumber(napi_env env, napi_value v, const char *fn, const char *name, double *out);
/* A RangeError unless have ≥ want. */
bool need(napi_env env, const char *fn, const char *name, size_t have, int64_t want);
Instance *instance(napi_env env);

napi_value PackedKernel(napi_env env, napi_callback_info info);
napi_value PackedLength(napi_env env, napi_callback_info info);
napi_value PackB(napi_env env, napi_callback_info info);
napi_value GemmPacked(napi_env env, napi_callback_info info);

#pragma GCC visibility pop

#endif
