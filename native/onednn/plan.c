/*
 * Plans of oneDNN primitives, cached per Node environment (main thread or worker), and the one
 * place that decides how many threads oneDNN uses.
 *
 * Threading: paratrain runs one device per core, so oneDNN must compute on the calling thread
 * only. Debian's libdnnl is built on the OpenMP runtime (libgomp), where oneDNN sizes its parallel
 * regions by omp_get_max_threads() — an OpenMP "ICV" that is per thread: omp_set_num_threads(1)
 * on one thread does not change another. So every thread that calls into oneDNN first sets its own
 * ICV to 1 (oneThread, once per OS thread). oneDNN then runs each primitive inline on that thread
 * (its parallel() helper skips the OpenMP region when one thread is asked for) and libgomp never
 * starts a thread pool; two device threads are two independent single-threaded oneDNN users.
 * Plans are created after the ICV is set, so each primitive is also partitioned for one thread.
 */
#include <stdio.h>
#include <string.h>
#include <oneapi/dnnl/dnnl_debug.h>
#include <pthread.h>
#include "onednn.h"

#if DNNL_CPU_RUNTIME == DNNL_RUNTIME_OMP
#include <omp.h>
#elif DNNL_CPU_RUNTIME != DNNL_RUNTIME_SEQ
#error "paratrain's onednn addon controls threads of OpenMP and sequential oneDNN builds only"
#endif

void oneThread(void) {
#if DNNL_CPU_RUNTIME == DNNL_RUNTIME_OMP
  static __thread bool done = false;
  if (done) return;
  omp_set_num_threads(1);
  done = true;
#endif
}

int threadsInUse(void) {
#if DNNL_CPU_RUNTIME == DNNL_RUNTIME_OMP
  return omp_get_max_threads();
#else
  return 1;
#endif
}

static uint64_t hashKey(const Key *k) {
  uint64_t h = 1469598103934665603ull;
  for (int i = 0; i < KEY_WORDS; i++) {
    h ^= (uint64_t)k->v[i];
    h *= 1099511628211ull;
    h ^= h >> 29;
  }
  return h;
}

Plan *planFind(Instance *inst, const Key *key) {
  for (uint64_t i = hashKey(key) % CACHE_SLOTS, n = 0; n < CACHE_SLOTS; n++, i = (i + 1) % CACHE_SLOTS) {
    Plan *p = &inst->table[i];
    if (!p->used) return NULL;
    if (memcmp(&p->key, key, sizeof *key) == 0) return p;
  }
  return NULL;
}

void planFree(Plan *p) {
  for (int i = 0; i < p->nsteps; i++) if (p->steps[i].prim) dnnl_primitive_destroy(p->steps[i].prim);
  for (int i = 0; i < p->nmems; i++) if (p->mems[i]) dnnl_memory_destroy(p->mems[i]);
  memset(p, 0, sizeof *p);
}

Plan *planNew(Instance *inst, const Key *key) {
  /* Full: start over. Shapes repeat every step, so the working set is rebuilt at once. */
  if (inst->count >= CACHE_LIMIT) {
    for (int i = 0; i < CACHE_SLOTS; i++) if (inst->table[i].used) planFree(&inst->table[i]);
    inst->count = 0;
  }
  uint64_t i = hashKey(key) % CACHE_SLOTS;
  while (inst->table[i].used) i = (i + 1) % CACHE_SLOTS;
  Plan *p = &inst->table[i];
  memset(p, 0, sizeof *p);
  p->key = *key;
  for (int a = 0; a < AUX_MEMS; a++) p->aux[a] = -1;
  return p;
}

int planMem(Instance *inst, Plan *p, const dnnl_memory_desc_t *md, int slot) {
  if (p->nmems == MAX_MEMS) return -1;
  dnnl_memory_t m = NULL;
  if (dnnl_memory_create(&m, md, inst->engine, slot >= 0 ? DNNL_MEMORY_NONE : DNNL_MEMORY_ALLOCATE) != dnnl_success) return -1;
  p->mems[p->nmems] = m;
  p->slot[p->nmems] = slot;
  return p->nmems++;
}

bool planStep(Plan *p, const_dnnl_primitive_desc_t pd, int nargs, const ArgRef *args) {
  if (p->nsteps == MAX_STEPS || nargs > MAX_ARGS) return false;
  for (int i = 0; i < nargs; i++) if (args[i].mem < 0) return false;
  Step *s = &p->steps[p->nsteps];
  if (dnnl_primitive_create(&s->prim, pd) != dnnl_success) { s->prim = NULL; return false; }
  s->nargs = nargs;
  memcpy(s->args, args, sizeof *args * (size_t)nargs);
  p->nsteps++;
  return true;
}

bool planRun(napi_env env, Instance *inst, Plan *p, void *const *ptrs, const char *fn) {
  for (int i = 0; i < p->nmems; i++) {
    if (p->slot[i] < 0) continue;
    dnnl_status_t s = dnnl_memory_set_data_handle(p->mems[i], ptrs[p->slot[i]]);
    if (s != dnnl_success) { throwStatus(env, fn, "set_data_handle", s); return false; }
  }
  sigset_t saved;
  holdSignals(&saved);
  dnnl_status_t s = dnnl_success;
  const char *what = "execute";
  for (int i = 0; i < p->nsteps && s == dnnl_success; i++) {
    const Step *st = &p->steps[i];
    dnnl_exec_arg_t args[MAX_ARGS];
    for (int a = 0; a < st->nargs; a++) args[a] = (dnnl_exec_arg_t){ st->args[a].arg, p->mems[st->args[a].mem] };
    s = dnnl_primitive_execute(st->prim, inst->stream, st->nargs, args);
  }
  if (s == dnnl_success) { what = "stream wait"; s = dnnl_stream_wait(inst->stream); }
  releaseSignals(&saved);
  if (s != dnnl_success) { throwStatus(env, fn, what, s); return false; }
  return true;
}

void holdSignals(sigset_t *saved) {
  sigset_t held;
  sigfillset(&held);
  static const int faults[] = { SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGABRT, SIGSYS };
  for (size_t i = 0; i < sizeof faults / sizeof *faults; i++) sigdelset(&held, faults[i]);
  pthread_sigmask(SIG_BLOCK, &held, saved);
}

void releaseSignals(const sigset_t *saved) {
  pthread_sigmask(SIG_SETMASK, saved, NULL);
}

void planCreated(Instance *inst, Plan *p, int kind, const_dnnl_primitive_desc_t pd) {
  const char *impl = NULL;
  if (pd) dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl);
  p->impl = impl;
  p->used = true;
  inst->count++;
  inst->created[kind]++;
  if (impl) inst->lastImpl[kind] = impl;
}

dnnl_primitive_desc_t reorderPd(Instance *inst, const dnnl_memory_desc_t *src, const dnnl_memory_desc_t *dst, bool accumulate) {
  dnnl_primitive_attr_t attr = NULL;
  dnnl_post_ops_t ops = NULL;
  dnnl_primitive_desc_t pd = NULL;
  if (accumulate) {
    if (dnnl_primitive_attr_create(&attr) != dnnl_success) return NULL;
    if (dnnl_post_ops_create(&ops) != dnnl_success || dnnl_post_ops_append_sum(ops, 1.0f) != dnnl_success ||
        dnnl_primitive_attr_set_post_ops(attr, ops) != dnnl_success) goto done;
  }
  if (dnnl_reorder_primitive_desc_create(&pd, src, inst->engine, dst, inst->engine, attr) != dnnl_success) pd = NULL;
done:
  if (ops) dnnl_post_ops_destroy(ops);
  if (attr) dnnl_primitive_attr_destroy(attr);
  return pd;
}

void throwStatus(napi_env env, const char *fn, const char *what, dnnl_status_t s) {
  char msg[200];
  snprintf(msg, sizeof msg, "%s: oneDNN %s failed (%s)", fn, what, dnnl_status2str(s));
  napi_throw_error(env, NULL, msg);
}
