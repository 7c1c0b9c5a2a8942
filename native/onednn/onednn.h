/*
 * Shared declarations of the onednn addon (the .c files next to it): the per-environment instance (engine,
 * stream, plan cache), cached plans of oneDNN primitives; the N-API argument helpers are
 * ../napi_args.h, shared with the OpenBLAS addon.
 *
 * A "plan" is what one Backend call runs: up to MAX_STEPS primitives (e.g. a weights reorder, then
 * the convolution) and the memory objects they read and write. Memory objects either wrap one of
 * the caller's arrays (a "slot": its data handle is set to the caller's pointer on every call, so
 * nothing is copied) or own a buffer oneDNN allocated (blocked weights, a pooling workspace).
 * Plans are created once per shape and kind and kept in a small per-environment hash table.
 */
#ifndef PARATRAIN_ONEDNN_H
#define PARATRAIN_ONEDNN_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stddef.h>
#include <node_api.h>
#include <oneapi/dnnl/dnnl.h>
#include "../napi_args.h"

/* ------------------------------------------------------------------ plans */

enum PlanKind {
  PLAN_MATMUL = 1, PLAN_CONV_FWD, PLAN_CONV_BWD_DATA, PLAN_CONV_BWD_WEIGHTS,
  PLAN_POOL_MAX_FWD, PLAN_POOL_AVG_FWD, PLAN_POOL_AVG_BWD,
  PLAN_ELTWISE_FWD, PLAN_ELTWISE_BWD, PLAN_BIAS_ADD, PLAN_LOGSOFTMAX,
  PLAN_POOL_MAX_BWD, /* no oneDNN primitive: direct.c's or a C scatter */
  PLAN_LSTM_FWD, PLAN_LSTM_BWD, PLAN_GRU_FWD, PLAN_GRU_BWD,
  PLAN_ATTENTION, /* attention.c's batched per-head products */
  PLAN_KINDS
};

#define KEY_WORDS 16
/* the largest plan: an LSTM's backward (rnn.c), two weight reorders, the primitive's 15 arguments, two gradient reorders, 18 memories */
#define MAX_STEPS 5
#define MAX_ARGS 16
#define MAX_MEMS 20
#define AUX_MEMS 8

/** What a plan is for: its kind and shape (unused words zero). Compared bytewise. */
typedef struct { int64_t v[KEY_WORDS]; } Key;

typedef struct { int arg; int mem; } ArgRef;

typedef struct {
  dnnl_primitive_t prim;
  int nargs;
  ArgRef args[MAX_ARGS];
} Step;

typedef struct Plan {
  Key key;
  bool used;
  int nsteps;
  Step steps[MAX_STEPS];
  int nmems;
  dnnl_memory_t mems[MAX_MEMS];
  /** slot[i] >= 0: mems[i] wraps the caller's pointer ptrs[slot[i]]; -1: it owns its buffer */
  int slot[MAX_MEMS];
  /** the main primitive's implementation, e.g. "brgconv:avx512_core" (static string from oneDNN) */
  const char *impl;
  /** kind-specific memory indexes, -1 where unused: the pooling workspace (aux[0]); rnn.c's own buffers */
  int aux[AUX_MEMS];
} Plan;

#define CACHE_SLOTS 256
#define CACHE_LIMIT 192

typedef struct {
  dnnl_engine_t engine;
  dnnl_stream_t stream;
  Plan table[CACHE_SLOTS];
  int count;
  /** per plan kind: plans created, and calls oneDNN had no primitive for (handed back to JS) */
  int64_t created[PLAN_KINDS];
  int64_t unsupported[PLAN_KINDS];
  /** per plan kind: the implementation of the last plan created */
  const char *lastImpl[PLAN_KINDS];
  /** per plan kind: calls run by direct.c's kernels instead of a oneDNN primitive */
  int64_t direct[PLAN_KINDS];
  /** gemm through dnnl_sgemm instead of the matmul primitive (setGemm, for benchmarks) */
  bool useSgemm;
  /** direct.c's kernels off: oneDNN's primitives for every shape (setDirect, for benchmarks and tests) */
  bool noDirect;
  /** gemm.c's copies of operands whose rows alias in the cache (padFloats floats; grown, freed with the instance) */
  float *pad;
  size_t padFloats;
} Instance;

Instance *instance(napi_env env);
/** Makes this OS thread run oneDNN single-threaded (OpenMP ICVs are per thread); cheap after the first call. */
void oneThread(void);
/** The threads oneDNN would use on the calling thread (omp_get_max_threads(); 1 for a sequential build). */
int threadsInUse(void);

/** The cached plan for `key`, or NULL when there is none yet. */
Plan *planFind(Instance *inst, const Key *key);
/** A fresh plan slot for `key` (flushes the cache when it is full). */
Plan *planNew(Instance *inst, const Key *key);
/** Releases a plan's primitives and memory objects (its slot becomes free). */
void planFree(Plan *p);
/** Adds a memory object for `md`: wrapping caller pointer `slot`, or owning a buffer when slot < 0. -1 on failure. */
int planMem(Instance *inst, Plan *p, const dnnl_memory_desc_t *md, int slot);
/** Adds a step running the primitive of `pd` with `nargs` (arg, mem) pairs; false on failure. */
bool planStep(Plan *p, const_dnnl_primitive_desc_t pd, int nargs, const ArgRef *args);
/** Runs every step with the caller's pointers (signals held, see holdSignals); false after throwing. */
bool planRun(napi_env env, Instance *inst, Plan *p, void *const *ptrs, const char *fn);

/*
 * This thread's asynchronous signals held while oneDNN computes, then released (pending ones are
 * handled then, or by another thread). oneDNN 2.6's AVX2 sgemm moves the stack pointer into a heap
 * buffer of its own (valgrind: "client switching stacks"), so a signal handled meanwhile on this
 * thread (SIGINT or SIGTERM for a graceful stop, --cpu-prof's SIGPROF) pushed its frame into the
 * heap: "corrupted size vs. prev_size", abort. Faults (SIGSEGV, SIGBUS, …) are never held.
 */
void holdSignals(sigset_t *saved);
void releaseSignals(const sigset_t *saved);
/** dnnl_sgemm (row-major) with signals held. */
dnnl_status_t sgemm(char ta, char tb, int64_t M, int64_t N, int64_t K, float alpha, const float *A, int64_t lda,
                    const float *B, int64_t ldb, float beta, float *C, int64_t ldc);
/** Records that `kind` got a new plan from `pd`. */
void planCreated(Instance *inst, Plan *p, int kind, const_dnnl_primitive_desc_t pd);

/** matmulPlan's tb for weights in the primitive's own format (the other values: 0 as stored, 1 transposed). */
#define MATMUL_PACKED_B 2
/** The cached matmul C = alpha·op(A)·B' + beta·C (gemm.c); NULL when oneDNN refuses. */
Plan *matmulPlan(Instance *inst, bool ta, int tb, int64_t M, int64_t N, int64_t K, float alpha, float beta);

/** A reorder of `src` into `dst`, accumulating (dst = src + dst) when `accumulate`; NULL when oneDNN refuses. */
dnnl_primitive_desc_t reorderPd(Instance *inst, const dnnl_memory_desc_t *src, const dnnl_memory_desc_t *dst, bool accumulate);

/* ------------------------------------------------------------------ N-API helpers (the rest: ../napi_args.h) */

/** A oneDNN call failed: throws naming the function, the call and oneDNN's status. */
void throwStatus(napi_env env, const char *fn, const char *what, dnnl_status_t s);

/* gemm.c: rows ld floats apart that collide in the cache (a multiple of 512); such rows copied into
 * `to` ld + PADDING_FLOATS apart; the environment's buffer for such copies, grown to `floats` (NULL: out of memory). */
#define PADDING_FLOATS 16
bool rowsAlias(int64_t ld);
void padRows(const float *m, int64_t rows, int64_t cols, int64_t ld, float *to);
float *padScratch(Instance *inst, size_t floats);

/* Activation codes shared with src/kernels/onednn/index.ts (the wasm backend's numbering); ACT_LINEAR is none.
 * ACT_GELU's backward reads the forward INPUT, the others' the output. */
enum { ACT_RELU = 0, ACT_CLIPPED_RELU, ACT_TANH, ACT_SIGMOID, ACT_LINEAR, ACT_NONE = ACT_LINEAR, ACT_GELU };

/* ------------------------------------------------------------------ direct kernels (direct.c) */

/** True when the convolution has few input channels and the CPU has AVX-512: direct.c's kernels run it. */
bool smallConv(const Geom *g);
/** y = conv, then relu / clipped relu to [0, cap] (act: ACT_RELU, ACT_CLIPPED_RELU, ACT_NONE). */
void smallConvForward(const Geom *g, const float *x, const float *w, const float *bias, float *y, int act, float cap);
/** dw += , db += (db may be NULL); false when out of memory. */
bool smallConvBackwardFilter(const Geom *g, const float *x, const float *dy, float *dw, float *db);
/** dx overwritten; false when out of memory. */
bool smallConvBackwardData(const Geom *g, const float *dy, const float *w, float *dx);
/** gemmconv.c: true on x86 without AVX-512 for windows of 64 values or more: the filter gradient runs as im2col + dnnl_sgemm. */
bool gemmFilterGradient(const Geom *g);
/** dw += , db += (db may be NULL) that way; false when out of memory or sgemm fails (the primitive runs instead). */
bool gemmConvBackwardFilter(const Geom *g, const float *x, const float *dy, float *dw, float *db);
/** True when the pooling windows do not overlap. */
bool poolTiles(const Geom *g);
/** dx overwritten from dy through argmax (poolTiles only); the count of argmax values outside their window, or -1 when out of memory. */
int64_t maxPoolBackwardTiles(const Geom *g, const float *dy, const int32_t *argmax, float *dx);

/* ------------------------------------------------------------------ exports (one file each) */

napi_value Sgemm(napi_env env, napi_callback_info info);
napi_value Conv2dForward(napi_env env, napi_callback_info info);
napi_value Conv2dBackwardData(napi_env env, napi_callback_info info);
napi_value Conv2dBackwardFilter(napi_env env, napi_callback_info info);
napi_value MaxPoolForward(napi_env env, napi_callback_info info);
napi_value MaxPoolBackward(napi_env env, napi_callback_info info);
napi_value AvgPoolForward(napi_env env, napi_callback_info info);
napi_value AvgPoolBackward(napi_env env, napi_callback_info info);
napi_value ActivationForward(napi_env env, napi_callback_info info);
napi_value ActivationBackward(napi_env env, napi_callback_info info);
napi_value BiasAdd(napi_env env, napi_callback_info info);
napi_value BiasGrad(napi_env env, napi_callback_info info);
napi_value LstmCellForward(napi_env env, napi_callback_info info);
napi_value LstmCellBackward(napi_env env, napi_callback_info info);
napi_value SoftmaxCrossEntropy(napi_env env, napi_callback_info info);
napi_value SetGemm(napi_env env, napi_callback_info info);
napi_value SetDirect(napi_env env, napi_callback_info info);
napi_value ConvPoolForward(napi_env env, napi_callback_info info);
napi_value PackedWeightsSize(napi_env env, napi_callback_info info);
napi_value PackWeights(napi_env env, napi_callback_info info);
napi_value GemmPackedWeights(napi_env env, napi_callback_info info);
napi_value Conv2dBackwardFilterPooled(napi_env env, napi_callback_info info);
napi_value RnnWorkspaceSize(napi_env env, napi_callback_info info);
napi_value RnnForward(napi_env env, napi_callback_info info);
napi_value RnnBackward(napi_env env, napi_callback_info info);
napi_value ChannelCentredSquares(napi_env env, napi_callback_info info);
napi_value BatchNormNormalise(napi_env env, napi_callback_info info);
napi_value BatchNormGradSums(napi_env env, napi_callback_info info);
napi_value BatchNormInputGrad(napi_env env, napi_callback_info info);
napi_value DropoutForward(napi_env env, napi_callback_info info);
napi_value AttentionWeights(napi_env env, napi_callback_info info);
napi_value AttentionApply(napi_env env, napi_callback_info info);
napi_value AttentionApplyBackward(napi_env env, napi_callback_info info);
napi_value AttentionWeightsBackward(napi_env env, napi_callback_info info);
napi_value CopyRows(napi_env env, napi_callback_info info);

#endif
