/* What the addon's source files share: the per-environment scratch, the N-API entry points of
 * recurrent.c, and the argument helpers (napi_args.h, shared with the onednn addon). */
#ifndef PARATRAIN_NATIVE_H
#define PARATRAIN_NATIVE_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdbool.h>
#include <node_api.h>
#include "napi_args.h"

/* Per Node environment (main thread, each worker): scratch buffers that grow on demand. */
typedef struct {
  float *col;          /* im2col chunks of the convolutions */
  size_t colBytes;
  size_t chunkBytes;
  float *apack;        /* packed A panels of gemmPacked */
  size_t apackBytes;
} Instance;

/* Shared between this addon's files only, never exported from the .node library. */
#pragma GCC visibility push(hidden)

Instance *instance(napi_env env);

napi_value PackedKernel(napi_env env, napi_callback_info info);
napi_value PackedLength(napi_env env, napi_callback_info info);
napi_value PackB(napi_env env, napi_callback_info info);
napi_value GemmPacked(napi_env env, napi_callback_info info);

#pragma GCC visibility pop

#endif
