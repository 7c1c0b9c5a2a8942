/*
 * paratrain_onednn: the optional `onednn` kernel backend's addon (Node-API, C over oneDNN 2.x's
 * C API). One file per kernel family (gemm.c and packed.c, conv.c, pool.c, eltwise.c, attention.c; direct.c and convpool.c
 * for the shapes the addon computes itself, see there), plans of primitives
 * cached per shape (plan.c); argument helpers shared with the OpenBLAS addon (../napi_args.h). Every kernel returns true when it ran and
 * false when oneDNN has no primitive for the call (the TypeScript side then runs the base
 * backend's kernel); softmaxCrossEntropy returns the loss, or null likewise.
 *
 * Each Node environment (main thread, worker) gets its own engine, stream and plan cache through
 * napi_set_instance_data; nothing is shared between threads but oneDNN's own (thread-safe)
 * primitive cache. Conventions match src/kernels/backend.ts: y/dx are overwritten, dw/db are
 * accumulated (+=).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <oneapi/dnnl/dnnl_debug.h>
#include "onednn.h"

Instance *instance(napi_env env) {
  Instance *inst = NULL;
  napi_get_instance_data(env, (void **)&inst);
  return inst;
}

static const char *const KIND_NAMES[PLAN_KINDS] = {
  [PLAN_MATMUL] = "matmul", [PLAN_CONV_FWD] = "convForward", [PLAN_CONV_BWD_DATA] = "convBackwardData",
  [PLAN_CONV_BWD_WEIGHTS] = "convBackwardWeights", [PLAN_POOL_MAX_FWD] = "maxPoolForward",
  [PLAN_POOL_AVG_FWD] = "avgPoolForward", [PLAN_POOL_AVG_BWD] = "avgPoolBackward",
  [PLAN_ELTWISE_FWD] = "eltwiseForward", [PLAN_ELTWISE_BWD] = "eltwiseBackward", [PLAN_BIAS_ADD] = "biasAdd",
  [PLAN_LOGSOFTMAX] = "logSoftmax", [PLAN_POOL_MAX_BWD] = "maxPoolBackward", [PLAN_LSTM_FWD] = "lstmForward",
  [PLAN_LSTM_BWD] = "lstmBackward", [PLAN_GRU_FWD] = "gruForward", [PLAN_GRU_BWD] = "gruBackward",
  [PLAN_ATTENTION] = "attention",
};

static bool setString(napi_env env, napi_value obj, const char *key, const char *value) {
  napi_value v;
  return napi_create_string_utf8(env, value ? value : "", NAPI_AUTO_LENGTH, &v) == napi_ok &&
         napi_set_named_property(env, obj, key, v) == napi_ok;
}

static bool setNumber(napi_env env, napi_value obj, const char *key, double value) {
  return napi_set_named_property(env, obj, key, numberValue(env, value)) == napi_ok;
}

static const char *runtimeName(unsigned r) {
  return r == DNNL_RUNTIME_OMP ? "openmp" : r == DNNL_RUNTIME_SEQ ? "sequential" : r == DNNL_RUNTIME_TBB ? "tbb"
       : r == DNNL_RUNTIME_THREADPOOL ? "threadpool" : "unknown";
}

/* info(): { version, isa, runtime, threads } — isa is the instruction set oneDNN dispatches to here. */
static napi_value Info(napi_env env, napi_callback_info info) {
  (void)info;
  oneThread();
  const dnnl_version_t *v = dnnl_version();
  char version[64];
  snprintf(version, sizeof version, "%d.%d.%d", v->major, v->minor, v->patch);
  const char *isa = dnnl_cpu_isa2str(dnnl_get_effective_cpu_isa());
  if (isa && strncmp(isa, "cpu_isa_", 8) == 0) isa += 8;
  napi_value obj;
  CHECK(napi_create_object(env, &obj));
  if (!setString(env, obj, "version", version) || !setString(env, obj, "isa", isa) ||
      !setString(env, obj, "runtime", runtimeName(v->cpu_runtime)) || !setNumber(env, obj, "threads", threadsInUse())) {
    throwLast(env, "info");
    return NULL;
  }
  return obj;
}

/* stats(): per plan kind { plans, unsupported, direct, impl } of this environment (tests and benchmarks read it). */
static napi_value Stats(napi_env env, napi_callback_info info) {
  (void)info;
  Instance *inst = instance(env);
  napi_value obj;
  CHECK(napi_create_object(env, &obj));
  for (int k = 1; k < PLAN_KINDS; k++) {
    napi_value kind;
    CHECK(napi_create_object(env, &kind));
    if (!setNumber(env, kind, "plans", (double)inst->created[k]) || !setNumber(env, kind, "unsupported", (double)inst->unsupported[k]) ||
        !setNumber(env, kind, "direct", (double)inst->direct[k]) ||
        !setString(env, kind, "impl", inst->lastImpl[k]) || napi_set_named_property(env, obj, KIND_NAMES[k], kind) != napi_ok) {
      throwLast(env, "stats");
      return NULL;
    }
  }
  if (!setNumber(env, obj, "cached", inst->count)) { throwLast(env, "stats"); return NULL; }
  return obj;
}

static void freeInstance(napi_env env, void *data, void *hint) {
  (void)env; (void)hint;
  Instance *inst = data;
  for (int i = 0; i < CACHE_SLOTS; i++) if (inst->table[i].used) planFree(&inst->table[i]);
  if (inst->stream) dnnl_stream_destroy(inst->stream);
  if (inst->engine) dnnl_engine_destroy(inst->engine);
  free(inst->pad);
  free(inst);
}

NAPI_MODULE_INIT(/* napi_env env, napi_value exports */) {
  /* This thread computes alone (see plan.c); the environment's engine and stream are made on it. */
  oneThread();
  if (dnnl_version()->cpu_runtime != DNNL_CPU_RUNTIME) {
    napi_throw_error(env, NULL, "paratrain_onednn: the loaded libdnnl uses another CPU runtime than the one it was built against (rebuild: npm run build:onednn)");
    return NULL;
  }
  Instance *inst = calloc(1, sizeof(Instance));
  if (!inst) { napi_throw_error(env, NULL, "paratrain_onednn: out of memory"); return NULL; }
  dnnl_status_t s = dnnl_engine_create(&inst->engine, dnnl_cpu, 0);
  if (s == dnnl_success) s = dnnl_stream_create(&inst->stream, inst->engine, dnnl_stream_default_flags);
  if (s != dnnl_success) { freeInstance(env, inst, NULL); throwStatus(env, "paratrain_onednn", "engine creation", s); return NULL; }
  if (napi_set_instance_data(env, inst, freeInstance, NULL) != napi_ok) { freeInstance(env, inst, NULL); throwLast(env, "init"); return NULL; }

  const napi_property_descriptor props[] = {
    { "sgemm", NULL, Sgemm, NULL, NULL, NULL, napi_enumerable, NULL },
    { "conv2dForward", NULL, Conv2dForward, NULL, NULL, NULL, napi_enumerable, NULL },
    { "conv2dBackwardData", NULL, Conv2dBackwardData, NULL, NULL, NULL, napi_enumerable, NULL },
    { "conv2dBackwardFilter", NULL, Conv2dBackwardFilter, NULL, NULL, NULL, napi_enumerable, NULL },
    { "maxPoolForward", NULL, MaxPoolForward, NULL, NULL, NULL, napi_enumerable, NULL },
    { "maxPoolBackward", NULL, MaxPoolBackward, NULL, NULL, NULL, napi_enumerable, NULL },
    { "avgPoolForward", NULL, AvgPoolForward, NULL, NULL, NULL, napi_enumerable, NULL },
    { "avgPoolBackward", NULL, AvgPoolBackward, NULL, NULL, NULL, napi_enumerable, NULL },
    { "activationForward", NULL, ActivationForward, NULL, NULL, NULL, napi_enumerable, NULL },
    { "activationBackward", NULL, ActivationBackward, NULL, NULL, NULL, napi_enumerable, NULL },
    { "biasAdd", NULL, BiasAdd, NULL, NULL, NULL, napi_enumerable, NULL },
    { "biasGrad", NULL, BiasGrad, NULL, NULL, NULL, napi_enumerable, NULL },
    { "lstmCellForward", NULL, LstmCellForward, NULL, NULL, NULL, napi_enumerable, NULL },
    { "lstmCellBackward", NULL, LstmCellBackward, NULL, NULL, NULL, napi_enumerable, NULL },
    { "softmaxCrossEntropy", NULL, SoftmaxCrossEntropy, NULL, NULL, NULL, napi_enumerable, NULL },
    { "setGemm", NULL, SetGemm, NULL, NULL, NULL, napi_enumerable, NULL },
    { "setDirect", NULL, SetDirect, NULL, NULL, NULL, napi_enumerable, NULL },
    { "convPoolForward", NULL, ConvPoolForward, NULL, NULL, NULL, napi_enumerable, NULL },
    { "packedWeightsSize", NULL, PackedWeightsSize, NULL, NULL, NULL, napi_enumerable, NULL },
    { "packWeights", NULL, PackWeights, NULL, NULL, NULL, napi_enumerable, NULL },
    { "gemmPackedWeights", NULL, GemmPackedWeights, NULL, NULL, NULL, napi_enumerable, NULL },
    { "conv2dBackwardFilterPooled", NULL, Conv2dBackwardFilterPooled, NULL, NULL, NULL, napi_enumerable, NULL },
    { "rnnWorkspaceSize", NULL, RnnWorkspaceSize, NULL, NULL, NULL, napi_enumerable, NULL },
    { "rnnForward", NULL, RnnForward, NULL, NULL, NULL, napi_enumerable, NULL },
    { "rnnBackward", NULL, RnnBackward, NULL, NULL, NULL, napi_enumerable, NULL },
    { "channelCentredSquares", NULL, ChannelCentredSquares, NULL, NULL, NULL, napi_enumerable, NULL },
    { "batchNormNormalise", NULL, BatchNormNormalise, NULL, NULL, NULL, napi_enumerable, NULL },
    { "batchNormGradSums", NULL, BatchNormGradSums, NULL, NULL, NULL, napi_enumerable, NULL },
    { "batchNormInputGrad", NULL, BatchNormInputGrad, NULL, NULL, NULL, napi_enumerable, NULL },
    { "dropoutForward", NULL, DropoutForward, NULL, NULL, NULL, napi_enumerable, NULL },
    { "attentionWeights", NULL, AttentionWeights, NULL, NULL, NULL, napi_enumerable, NULL },
    { "attentionApply", NULL, AttentionApply, NULL, NULL, NULL, napi_enumerable, NULL },
    { "attentionApplyBackward", NULL, AttentionApplyBackward, NULL, NULL, NULL, napi_enumerable, NULL },
    { "attentionWeightsBackward", NULL, AttentionWeightsBackward, NULL, NULL, NULL, napi_enumerable, NULL },
    { "copyRows", NULL, CopyRows, NULL, NULL, NULL, napi_enumerable, NULL },
    { "info", NULL, Info, NULL, NULL, NULL, napi_enumerable, NULL },
    { "stats", NULL, Stats, NULL, NULL, NULL, napi_enumerable, NULL },
  };
  CHECK(napi_define_properties(env, exports, sizeof props / sizeof props[0], props));
  return exports;
}
