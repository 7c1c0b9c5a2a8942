/*
 * paratrain_mpi: the optional Open MPI transport's addon (Node-API, plain C).
 *
 * Thin, checked wrappers over MPI for the calls of src/comm/communicator.ts; the TypeScript side
 * (src/comm/mpi/mpiCommunicator.ts) adds the Communicator semantics and the errors for people.
 *
 * Threading: MPI is initialised with MPI_THREAD_FUNNELED by whichever JS thread calls init() —
 * the main thread or one worker thread — and only that thread may call MPI afterwards. The addon
 * records the initialising thread and refuses calls from any other (a clear error instead of
 * undefined behaviour). MPI can be initialised once per process and not again after finalize().
 *
 * Non-blocking calls return a request number, completed with test() (MPI_Test) or wait()
 * (MPI_Wait): isend/irecv, so a JS thread can have a send and a receive in flight at once (two
 * ranks sending to each other first do not deadlock), and iallreduce/ireduceScatter/iallgather,
 * the transport's collectives, so a bucket can be in flight while JS computes. A pending request
 * holds a reference to its Float32Array, so the memory stays alive until it completes; a
 * collective's post-processing (÷ size for a mean, the reduce-scatter's move into place) runs when
 * test() or wait() first sees it complete. Open MPI progresses non-blocking collectives only inside
 * MPI calls (there is no progress thread): between the caller's test() calls the collective waits.
 * broadcast, barrier and allreduce (MPI_Allreduce: the benchmarks' reference, Open MPI's tuned
 * blocking algorithm) block the calling thread.
 *
 * Collectives run on a duplicate of MPI_COMM_WORLD (so nothing else in the process can match our
 * messages) whose error handler is MPI_ERRORS_RETURN: a failing call throws a JS Error with MPI's
 * own error string instead of killing the process.
 *
 * Open MPI loads its components (plugins) with dlopen; they need libmpi's symbols in the global
 * namespace, but Node loads addons with RTLD_LOCAL. Before MPI_Init the addon therefore re-opens
 * the libmpi it is linked against with RTLD_GLOBAL | RTLD_NOLOAD (found with dladdr), as mpi4py
 * does; the JS loader also passes RTLD_GLOBAL to process.dlopen.
 *
 * Arrays may be views at any byteOffset into an ArrayBuffer or SharedArrayBuffer; counts must fit
 * MPI's int (2^31 − 1 floats, 8 GiB).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <mpi.h>
#include <node_api.h>

/* ------------------------------------------------------------------ process-wide MPI state */

/* 0: never initialised, 1: initialised, 2: finalised. Atomic: any thread may read it (to be told
 * it is not the owner); g_owner is written before the state becomes 1. Transitions hold g_lock. */
static _Atomic int g_state = 0;
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_t g_owner;          /* the thread that called MPI_Init_thread */
static MPI_Comm g_comm = MPI_COMM_NULL;
static int g_rank = -1, g_size = 0, g_provided = -1;

/* Pending non-blocking requests: a small table indexed by request number. */
#define MAX_REQUESTS 1024
enum { REQ_P2P, REQ_ALLREDUCE, REQ_REDUCE_SCATTER, REQ_ALLGATHER };
typedef struct {
  MPI_Request req;
  napi_ref buf;  /* keeps the array alive while MPI may touch it */
  napi_env env;
  bool used;
  int kind;
  bool mean;     /* a collective's op: divide by the size once complete */
  float *x;
  int n;
  int *counts, *displs;  /* reduce-scatter/all-gather layout: MPI reads it until completion */
} Pending;
static Pending g_pending[MAX_REQUESTS];

/* ------------------------------------------------------------------ helpers */

#define CHECK(call)                                                            \
  do {                                                                         \
    if ((call) != napi_ok) { throwLast(env, #call); return NULL; }             \
  } while (0)

static void throwLast(napi_env env, const char *what) {
  bool pending = false;
  napi_is_exception_pending(env, &pending);
  if (pending) return;
  const napi_extended_error_info *info = NULL;
  napi_get_last_error_info(env, &info);
  napi_throw_error(env, NULL, info && info->error_message ? info->error_message : what);
}

/* Throws Error("fn: what") with an optional error code (e.g. ERR_MPI). */
static void throwMsg(napi_env env, const char *code, const char *fn, const char *what) {
  char msg[1024];
  snprintf(msg, sizeof msg, "%s: %s", fn, what);
  napi_throw_error(env, code, msg);
}

/* Throws "fn: <MPI error string>" when rc is not MPI_SUCCESS; returns whether it threw. */
static bool mpiFailed(napi_env env, int rc, const char *fn) {
  if (rc == MPI_SUCCESS) return false;
  char err[MPI_MAX_ERROR_STRING + 1];
  int len = 0;
  if (MPI_Error_string(rc, err, &len) != MPI_SUCCESS) snprintf(err, sizeof err, "MPI error code %d", rc);
  else err[len] = '\0';
  char what[MPI_MAX_ERROR_STRING + 16];
  snprintf(what, sizeof what, "failed: %s", err);
  throwMsg(env, "ERR_MPI", fn, what);
  return true;
}

/* MPI must be initialised, not finalised, and called from the thread that initialised it. */
static bool ready(napi_env env, const char *fn) {
  if (g_state == 0) { throwMsg(env, "ERR_MPI_STATE", fn, "MPI is not initialised (call init() first)"); return false; }
  if (g_state == 2) { throwMsg(env, "ERR_MPI_STATE", fn, "MPI was finalised (it cannot be used again in this process)"); return false; }
  if (!pthread_equal(pthread_self(), g_owner)) {
    throwMsg(env, "ERR_MPI_THREAD", fn, "called from another thread than the one that initialised MPI "
             "(MPI_THREAD_FUNNELED: only that thread may use it)");
    return false;
  }
  return true;
}

static bool getArgs(napi_env env, napi_callback_info info, size_t want, napi_value *argv, const char *fn) {
  size_t argc = want;
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok) { throwLast(env, fn); return false; }
  if (argc < want) {
    char what[64];
    snprintf(what, sizeof what, "expected %zu arguments, got %zu", want, argc);
    throwMsg(env, NULL, fn, what);
    return false;
  }
  return true;
}

static bool getF32(napi_env env, napi_value v, const char *fn, float **data, int *count) {
  bool isTyped = false;
  napi_typedarray_type type;
  void *ptr = NULL;
  size_t len = 0;
  napi_is_typedarray(env, v, &isTyped);
  if (!isTyped || napi_get_typedarray_info(env, v, &type, &len, &ptr, NULL, NULL) != napi_ok || type != napi_float32_array) {
    char msg[160];
    snprintf(msg, sizeof msg, "%s: the buffer must be a Float32Array", fn);
    napi_throw_type_error(env, NULL, msg);
    return false;
  }
  if (len > (size_t)INT_MAX) {
    char msg[200];
    snprintf(msg, sizeof msg, "%s: %zu floats exceed MPI's count limit of %d per call (split the buffer)", fn, len, INT_MAX);
    napi_throw_range_error(env, NULL, msg);
    return false;
  }
  *data = (float *)ptr;
  *count = (int)len;
  return true;
}

static bool getInt(napi_env env, napi_value v, const char *fn, const char *name, int lo, int hi, int *out) {
  double d;
  if (napi_get_value_double(env, v, &d) != napi_ok || d != (double)(int64_t)d || d < lo || d > hi) {
    char msg[200];
    snprintf(msg, sizeof msg, "%s: %s must be an integer in %d…%d", fn, name, lo, hi);
    napi_throw_range_error(env, NULL, msg);
    return false;
  }
  *out = (int)d;
  return true;
}

/* op: 0 = sum, 1 = mean */
static bool getOp(napi_env env, napi_value v, const char *fn, bool *mean) {
  int op;
  if (!getInt(env, v, fn, "op (0 = sum, 1 = mean)", 0, 1, &op)) return false;
  *mean = op == 1;
  return true;
}

static napi_value undefinedValue(napi_env env) {
  napi_value u;
  napi_get_undefined(env, &u);
  return u;
}

/* The ownedSlice(n, size, rank) layout of src/comm/communicator.ts, for every rank. */
static void layout(int n, int *counts, int *displs) {
  const int base = n / g_size, extra = n % g_size;
  for (int r = 0, at = 0; r < g_size; r++) {
    counts[r] = base + (r < extra ? 1 : 0);
    displs[r] = at;
    at += counts[r];
  }
}

static void divide(float *x, int n, int by) {
  const float d = (float)by;
  for (int i = 0; i < n; i++) x[i] /= d;
}

/* Makes libmpi's symbols global so the components Open MPI dlopens can bind to them. */
static const char *promoteLibmpi(void) {
  Dl_info dl;
  if (!dladdr((void *)&MPI_Init_thread, &dl) || !dl.dli_fname) return "dladdr found no library for MPI_Init_thread";
  if (!dlopen(dl.dli_fname, RTLD_NOW | RTLD_GLOBAL | RTLD_NOLOAD)) return dlerror();
  return NULL;
}

/* ------------------------------------------------------------------ calls */

/* init() → { rank, size, provided, library }; idempotent on the initialising thread. */
static napi_value InitLocked(napi_env env);

static napi_value Init(napi_env env, napi_callback_info info) {
  (void)info;
  pthread_mutex_lock(&g_lock);  /* two threads racing to initialise: one wins, the other is told */
  napi_value out = InitLocked(env);
  pthread_mutex_unlock(&g_lock);
  return out;
}

static napi_value InitLocked(napi_env env) {
  if (g_state == 2) { throwMsg(env, "ERR_MPI_STATE", "init", "MPI was already finalised in this process; it cannot be initialised again"); return NULL; }
  if (g_state == 0) {
    int already = 0;
    MPI_Initialized(&already);
    if (already) { throwMsg(env, "ERR_MPI_STATE", "init", "MPI was initialised by something else in this process"); return NULL; }
    const char *why = promoteLibmpi();
    if (why) fprintf(stderr, "paratrain_mpi: could not make libmpi global (%s); Open MPI may fail to load its components\n", why);
    /* Open MPI's libnbc reduces an in-place MPI_Iallreduce with a binomial tree (to rank 0 and
     * back) at every size unless told otherwise: half of MPI_Allreduce's bandwidth or less on MBs.
     * Its ring is bandwidth-optimal; a value from mpirun --mca or the environment is kept. */
    setenv("OMPI_MCA_coll_libnbc_iallreduce_algorithm", "ring", 0);
    int provided = -1;
    int rc = MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided);
    if (rc != MPI_SUCCESS) { mpiFailed(env, rc, "MPI_Init_thread"); return NULL; }
    g_owner = pthread_self();
    g_provided = provided;
    g_state = 1;
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    if (mpiFailed(env, MPI_Comm_dup(MPI_COMM_WORLD, &g_comm), "MPI_Comm_dup")) return NULL;
    MPI_Comm_set_errhandler(g_comm, MPI_ERRORS_RETURN);
    MPI_Comm_rank(g_comm, &g_rank);
    MPI_Comm_size(g_comm, &g_size);
  } else if (!ready(env, "init")) {
    return NULL;
  }
  char lib[MPI_MAX_LIBRARY_VERSION_STRING + 1];
  int len = 0;
  MPI_Get_library_version(lib, &len);
  lib[len] = '\0';
  while (len > 0 && (lib[len - 1] == '\n' || lib[len - 1] == ' ')) lib[--len] = '\0';
  napi_value obj, v;
  CHECK(napi_create_object(env, &obj));
  CHECK(napi_create_int32(env, g_rank, &v));
  CHECK(napi_set_named_property(env, obj, "rank", v));
  CHECK(napi_create_int32(env, g_size, &v));
  CHECK(napi_set_named_property(env, obj, "size", v));
  CHECK(napi_create_int32(env, g_provided, &v));
  CHECK(napi_set_named_property(env, obj, "provided", v));
  CHECK(napi_create_string_utf8(env, lib, NAPI_AUTO_LENGTH, &v));
  CHECK(napi_set_named_property(env, obj, "library", v));
  return obj;
}

/* state() → 'uninitialized' | 'initialized' | 'finalized' (any thread) */
static napi_value State(napi_env env, napi_callback_info info) {
  (void)info;
  napi_value s;
  const char *name = g_state == 0 ? "uninitialized" : g_state == 1 ? "initialized" : "finalized";
  CHECK(napi_create_string_utf8(env, name, NAPI_AUTO_LENGTH, &s));
  return s;
}

/* allreduce(buf, op): blocking MPI_Allreduce, the benchmarks' reference (the transport uses iallreduce). */
static napi_value Allreduce(napi_env env, napi_callback_info info) {
  napi_value argv[2];
  float *x; int n; bool mean;
  if (!getArgs(env, info, 2, argv, "allreduce") || !ready(env, "allreduce") || !getF32(env, argv[0], "allreduce", &x, &n) ||
      !getOp(env, argv[1], "allreduce", &mean)) return NULL;
  if (mpiFailed(env, MPI_Allreduce(MPI_IN_PLACE, x, n, MPI_FLOAT, MPI_SUM, g_comm), "MPI_Allreduce")) return NULL;
  if (mean) divide(x, n, g_size);
  return undefinedValue(env);
}

/* broadcast(buf, root) */
static napi_value Broadcast(napi_env env, napi_callback_info info) {
  napi_value argv[2];
  float *x; int n, root;
  if (!getArgs(env, info, 2, argv, "broadcast") || !ready(env, "broadcast") || !getF32(env, argv[0], "broadcast", &x, &n) ||
      !getInt(env, argv[1], "broadcast", "root", 0, g_size - 1, &root)) return NULL;
  if (mpiFailed(env, MPI_Bcast(x, n, MPI_FLOAT, root, g_comm), "MPI_Bcast")) return NULL;
  return undefinedValue(env);
}

static napi_value Barrier(napi_env env, napi_callback_info info) {
  (void)info;
  if (!ready(env, "barrier")) return NULL;
  if (mpiFailed(env, MPI_Barrier(g_comm), "MPI_Barrier")) return NULL;
  return undefinedValue(env);
}

static int newSlot(void) {
  for (int i = 0; i < MAX_REQUESTS; i++) if (!g_pending[i].used) return i;
  return -1;
}

/* A free request slot, or NULL with the error thrown (too many in flight). */
static Pending *claimSlot(napi_env env, int *slot) {
  *slot = newSlot();
  if (*slot < 0) { napi_throw_error(env, "ERR_MPI_REQUESTS", "too many MPI operations in flight (1024); await some first"); return NULL; }
  return &g_pending[*slot];
}

/* A posted request made live: `buf` kept alive until it completes; its number, for test()/wait(). */
static napi_value issued(napi_env env, Pending *p, int slot, napi_value buf) {
  CHECK(napi_create_reference(env, buf, 1, &p->buf));
  p->env = env;
  p->used = true;
  napi_value id;
  CHECK(napi_create_int32(env, slot, &id));
  return id;
}

/* isend(buf, dest, tag) / irecv(buf, source, tag) → request number, polled with test(). */
static napi_value postP2P(napi_env env, napi_callback_info info, bool isSend) {
  const char *fn = isSend ? "isend" : "irecv";
  napi_value argv[3];
  float *x; int n, peer, tag;
  if (!getArgs(env, info, 3, argv, fn) || !ready(env, fn) || !getF32(env, argv[0], fn, &x, &n) ||
      !getInt(env, argv[1], fn, isSend ? "dest" : "source", 0, g_size - 1, &peer)) return NULL;
  int *tagUb = NULL, flag = 0;
  MPI_Comm_get_attr(g_comm, MPI_TAG_UB, &tagUb, &flag);
  if (!getInt(env, argv[2], fn, "tag", 0, flag && tagUb ? *tagUb : 32767, &tag)) return NULL;
  int slot;
  Pending *p = claimSlot(env, &slot);
  if (!p) return NULL;
  *p = (Pending){ .kind = REQ_P2P };
  int rc = isSend ? MPI_Isend(x, n, MPI_FLOAT, peer, tag, g_comm, &p->req)
                  : MPI_Irecv(x, n, MPI_FLOAT, peer, tag, g_comm, &p->req);
  if (mpiFailed(env, rc, isSend ? "MPI_Isend" : "MPI_Irecv")) return NULL;
  return issued(env, p, slot, argv[0]);
}

static napi_value Isend(napi_env env, napi_callback_info info) { return postP2P(env, info, true); }
static napi_value Irecv(napi_env env, napi_callback_info info) { return postP2P(env, info, false); }

static void freeLayout(Pending *p) {
  free(p->counts);
  free(p->displs);
  p->counts = p->displs = NULL;
}

/*
 * iallreduce(buf, op) / ireduceScatter(buf, op) / iallgather(buf) → request number, completed with
 * test() or wait(). In place: MPI_Iallreduce(MPI_IN_PLACE); MPI_Ireduce_scatter(MPI_IN_PLACE) with
 * the ownedSlice counts stores this rank's block at the START of buf, moved to its own position on
 * completion (memmove: the ranges may overlap); MPI_Iallgatherv(MPI_IN_PLACE) with the same counts.
 */
static napi_value postCollective(napi_env env, napi_callback_info info, int kind) {
  const char *fn = kind == REQ_ALLREDUCE ? "iallreduce" : kind == REQ_REDUCE_SCATTER ? "ireduceScatter" : "iallgather";
  const size_t want = kind == REQ_ALLGATHER ? 1 : 2;
  napi_value argv[2];
  float *x; int n; bool mean = false;
  if (!getArgs(env, info, want, argv, fn) || !ready(env, fn) || !getF32(env, argv[0], fn, &x, &n) ||
      (kind != REQ_ALLGATHER && !getOp(env, argv[1], fn, &mean))) return NULL;
  int slot;
  Pending *p = claimSlot(env, &slot);
  if (!p) return NULL;
  *p = (Pending){ .kind = kind, .mean = mean, .x = x, .n = n };
  int rc;
  const char *call = kind == REQ_ALLREDUCE ? "MPI_Iallreduce" : kind == REQ_REDUCE_SCATTER ? "MPI_Ireduce_scatter" : "MPI_Iallgatherv";
  if (kind == REQ_ALLREDUCE) {
    rc = MPI_Iallreduce(MPI_IN_PLACE, x, n, MPI_FLOAT, MPI_SUM, g_comm, &p->req);
  } else {
    p->counts = malloc((size_t)g_size * sizeof(int));
    p->displs = malloc((size_t)g_size * sizeof(int));
    if (!p->counts || !p->displs) { freeLayout(p); napi_throw_error(env, NULL, "out of memory"); return NULL; }
    layout(n, p->counts, p->displs);
    rc = kind == REQ_REDUCE_SCATTER
             ? MPI_Ireduce_scatter(MPI_IN_PLACE, x, p->counts, MPI_FLOAT, MPI_SUM, g_comm, &p->req)
             : MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, x, p->counts, p->displs, MPI_FLOAT, g_comm, &p->req);
  }
  if (mpiFailed(env, rc, call)) { freeLayout(p); return NULL; }
  return issued(env, p, slot, argv[0]);
}

static napi_value Iallreduce(napi_env env, napi_callback_info info) { return postCollective(env, info, REQ_ALLREDUCE); }
static napi_value IreduceScatter(napi_env env, napi_callback_info info) { return postCollective(env, info, REQ_REDUCE_SCATTER); }
static napi_value Iallgather(napi_env env, napi_callback_info info) { return postCollective(env, info, REQ_ALLGATHER); }

/* A completed collective's post-processing: the owned block into place, ÷ size for a mean. */
static void finishCollective(Pending *p) {
  float *x = p->x;
  int n = p->n;
  if (p->kind == REQ_REDUCE_SCATTER) {
    const int start = p->displs[g_rank];
    n = p->counts[g_rank];
    if (start > 0 && n > 0) memmove(p->x + start, p->x, (size_t)n * sizeof(float));
    x = p->x + start;
  }
  if (p->mean) divide(x, n, g_size);
}

/*
 * test(request) → false while pending; when done: true for a send or a collective, the number of
 * floats received for a receive (a message longer than the buffer is an error: MPI_ERR_TRUNCATE).
 * wait(request) blocks until done (MPI_Wait) and answers as test() does then.
 */
static napi_value settle(napi_env env, napi_callback_info info, bool wait) {
  const char *fn = wait ? "wait" : "test";
  napi_value argv[1];
  int slot;
  if (!getArgs(env, info, 1, argv, fn) || !ready(env, fn) ||
      !getInt(env, argv[0], fn, "request", 0, MAX_REQUESTS - 1, &slot)) return NULL;
  Pending *p = &g_pending[slot];
  if (!p->used) { throwMsg(env, NULL, fn, "no such request (already completed?)"); return NULL; }
  int done = 0;
  MPI_Status st;
  int rc = wait ? MPI_Wait(&p->req, &st) : MPI_Test(&p->req, &done, &st);
  if (wait && rc == MPI_SUCCESS) done = 1;
  if (rc == MPI_ERR_IN_STATUS) rc = st.MPI_ERROR;
  const int kind = p->kind;
  if (rc == MPI_SUCCESS && done && kind != REQ_P2P) finishCollective(p);
  if (rc != MPI_SUCCESS || done) {
    napi_delete_reference(env, p->buf);
    freeLayout(p);
    p->used = false;
  }
  if (mpiFailed(env, rc, wait ? "MPI_Wait" : "MPI_Test")) return NULL;
  napi_value out;
  if (!done) { CHECK(napi_get_boolean(env, false, &out)); return out; }
  int count = MPI_UNDEFINED;
  if (kind == REQ_P2P) MPI_Get_count(&st, MPI_FLOAT, &count);
  if (count == MPI_UNDEFINED) { CHECK(napi_get_boolean(env, true, &out)); return out; }
  CHECK(napi_create_int32(env, count, &out));
  return out;
}

static napi_value Test(napi_env env, napi_callback_info info) { return settle(env, info, false); }
static napi_value Wait(napi_env env, napi_callback_info info) { return settle(env, info, true); }

/* abort(message, code): prints the message to stderr and ends every process of the job. */
static napi_value Abort(napi_env env, napi_callback_info info) {
  napi_value argv[2];
  if (!getArgs(env, info, 2, argv, "abort")) return NULL;
  char msg[1024];
  size_t len = 0;
  if (napi_get_value_string_utf8(env, argv[0], msg, sizeof msg, &len) != napi_ok) snprintf(msg, sizeof msg, "(no message)");
  int code = 1;
  if (!getInt(env, argv[1], "abort", "code", 1, 255, &code)) return NULL;
  fprintf(stderr, "paratrain: rank %d aborts the MPI job: %s\n", g_rank, msg);
  fflush(stderr);
  if (g_state != 1) exit(code);  /* not initialised (or finalised): nothing to tell the others */
  MPI_Abort(MPI_COMM_WORLD, code);
  return undefinedValue(env);  /* not reached */
}

/* finalize(): frees the communicator and finalises MPI; a second call does nothing. */
static napi_value Finalize(napi_env env, napi_callback_info info) {
  (void)info;
  if (g_state == 2) return undefinedValue(env);
  if (!ready(env, "finalize")) return NULL;
  for (int i = 0; i < MAX_REQUESTS; i++) {
    Pending *p = &g_pending[i];
    if (!p->used) continue;
    /* a point-to-point request is cancelled; a collective cannot be (MPI forbids cancelling or
     * freeing one), so it is only forgotten: finalising with one pending is the caller's error */
    if (p->kind == REQ_P2P) {
      MPI_Cancel(&p->req);
      MPI_Request_free(&p->req);
    }
    napi_delete_reference(p->env, p->buf);
    freeLayout(p);
    p->used = false;
  }
  MPI_Comm_free(&g_comm);
  g_state = 2;  /* only the owner thread gets here, so no other transition can race */
  if (mpiFailed(env, MPI_Finalize(), "MPI_Finalize")) return NULL;
  return undefinedValue(env);
}

/* ------------------------------------------------------------------ module */

NAPI_MODULE_INIT(/* napi_env env, napi_value exports */) {
  const napi_property_descriptor props[] = {
    { "init", NULL, Init, NULL, NULL, NULL, napi_enumerable, NULL },
    { "state", NULL, State, NULL, NULL, NULL, napi_enumerable, NULL },
    { "allreduce", NULL, Allreduce, NULL, NULL, NULL, napi_enumerable, NULL },
    { "iallreduce", NULL, Iallreduce, NULL, NULL, NULL, napi_enumerable, NULL },
    { "ireduceScatter", NULL, IreduceScatter, NULL, NULL, NULL, napi_enumerable, NULL },
    { "iallgather", NULL, Iallgather, NULL, NULL, NULL, napi_enumerable, NULL },
    { "broadcast", NULL, Broadcast, NULL, NULL, NULL, napi_enumerable, NULL },
    { "barrier", NULL, Barrier, NULL, NULL, NULL, napi_enumerable, NULL },
    { "isend", NULL, Isend, NULL, NULL, NULL, napi_enumerable, NULL },
    { "irecv", NULL, Irecv, NULL, NULL, NULL, napi_enumerable, NULL },
    { "test", NULL, Test, NULL, NULL, NULL, napi_enumerable, NULL },
    { "wait", NULL, Wait, NULL, NULL, NULL, napi_enumerable, NULL },
    { "abort", NULL, Abort, NULL, NULL, NULL, napi_enumerable, NULL },
    { "finalize", NULL, Finalize, NULL, NULL, NULL, napi_enumerable, NULL },
  };
  CHECK(napi_define_properties(env, exports, sizeof props / sizeof props[0], props));
  return exports;
}
