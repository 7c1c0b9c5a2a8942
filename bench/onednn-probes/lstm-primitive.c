/*
 * oneDNN's own LSTM primitive at `bench lstm`'s shape (batch 32, 100 frames, 494 inputs, 512 units,
 * one direction, zero initial state), forward training + backward, one thread: what the addon's
 * recurrent path (matmul primitive per step + cells.c) is measured against. The weights come in
 * PyTorch's layout (ldgoi) and are reordered each pass into the layouts the primitives ask for;
 * the weight gradients are accumulated by the primitive (zeroed first) and reordered back; all of it
 * counted. Prints ms per pass (median of 7 after 2 warm-ups) and GFLOPS as `bench lstm` counts them
 * (24·N·T·H·(F+H) per pass), and the implementation oneDNN chose.
 *
 * The zero initial state is given explicitly, as native/onednn/rnn.c does: built with -DNO_STATE
 * (none given), oneDNN 2.6's backward reads an uninitialised one for the first step's dW_hh, and
 * the check it prints last, dW_hh at T = 1 (where h₋₁ = 0 makes it exactly 0), fails.
 * -DLAYOUT=dnnl_ntc: the batch-major layout (on a Zen 4: 411–503 ms a pass against tnc's 373–376).
 *
 *   gcc -O2 -o /tmp/lstm-primitive bench/onednn-probes/lstm-primitive.c -ldnnl -fopenmp && /tmp/lstm-primitive
 */
#include <omp.h>
#include <oneapi/dnnl/dnnl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifndef LAYOUT
#define LAYOUT dnnl_tnc
#endif
#ifdef NO_STATE
#define STATE NULL
#else
#define STATE &sIter
#endif

#define CHECK(x) do { dnnl_status_t s_ = (x); if (s_ != dnnl_success) { fprintf(stderr, "%s:%d %s: status %d\n", __FILE__, __LINE__, #x, (int)s_); exit(1); } } while (0)

static double cpuNow(void) {
  struct timespec t;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

static dnnl_engine_t engine;
static dnnl_stream_t stream;

static dnnl_memory_t memOf(const dnnl_memory_desc_t *md) {
  dnnl_memory_t m;
  CHECK(dnnl_memory_create(&m, md, engine, DNNL_MEMORY_ALLOCATE));
  return m;
}

static void fill(dnnl_memory_t m, const dnnl_memory_desc_t *md, unsigned seed) {
  float *p;
  CHECK(dnnl_memory_get_data_handle(m, (void **)&p));
  const size_t n = dnnl_memory_desc_get_size(md) / sizeof(float);
  for (size_t i = 0; i < n; i++) { seed = seed * 1103515245u + 12345u; p[i] = ((seed >> 9) & 0xffff) / 65536.0f * 0.2f - 0.1f; }
}

static void reorder(dnnl_memory_t from, const dnnl_memory_desc_t *fromMd, dnnl_memory_t to, const dnnl_memory_desc_t *toMd) {
  dnnl_primitive_desc_t pd;
  dnnl_primitive_t p;
  CHECK(dnnl_reorder_primitive_desc_create(&pd, fromMd, engine, toMd, engine, NULL));
  CHECK(dnnl_primitive_create(&p, pd));
  dnnl_exec_arg_t args[] = { { DNNL_ARG_FROM, from }, { DNNL_ARG_TO, to } };
  CHECK(dnnl_primitive_execute(p, stream, 2, args));
  dnnl_primitive_destroy(p);
  dnnl_primitive_desc_destroy(pd);
}

static int cmp(const void *a, const void *b) {
  const double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* Runs `reps` passes at the shape; prints the timing, or with reps = 1 the largest |dW_hh| (which must be 0 at T = 1). */
static void run(const int N, const int T, const int F, const int H, const int reps) {

  dnnl_memory_desc_t src, dst, wl, wi, bias, wlUser, wiUser, wlAny, wiAny, diffSrc, diffDst, diffBias;
  const dnnl_dims_t srcDims = { T, N, F }, dstDims = { T, N, H }, wlDims = { 1, 1, F, 4, H }, wiDims = { 1, 1, H, 4, H }, bDims = { 1, 1, 4, H };
  /* LAYOUT: tnc, time-major as the layer keeps a direction (-DLAYOUT=dnnl_ntc: batch-major) */
  CHECK(dnnl_memory_desc_init_by_tag(&src, 3, srcDims, dnnl_f32, LAYOUT));
  CHECK(dnnl_memory_desc_init_by_tag(&dst, 3, dstDims, dnnl_f32, LAYOUT));
  CHECK(dnnl_memory_desc_init_by_tag(&diffSrc, 3, srcDims, dnnl_f32, LAYOUT));
  CHECK(dnnl_memory_desc_init_by_tag(&diffDst, 3, dstDims, dnnl_f32, LAYOUT));
  CHECK(dnnl_memory_desc_init_by_tag(&wlUser, 5, wlDims, dnnl_f32, dnnl_ldgoi)); /* PyTorch's W_ih [4H, F] */
  CHECK(dnnl_memory_desc_init_by_tag(&wiUser, 5, wiDims, dnnl_f32, dnnl_ldgoi)); /* W_hh [4H, H] */
  CHECK(dnnl_memory_desc_init_by_tag(&wlAny, 5, wlDims, dnnl_f32, dnnl_format_tag_any));
  CHECK(dnnl_memory_desc_init_by_tag(&wiAny, 5, wiDims, dnnl_f32, dnnl_format_tag_any));
  CHECK(dnnl_memory_desc_init_by_tag(&bias, 4, bDims, dnnl_f32, dnnl_ldgo));
  CHECK(dnnl_memory_desc_init_by_tag(&diffBias, 4, bDims, dnnl_f32, dnnl_ldgo));

  dnnl_memory_desc_t sIter;
  const dnnl_dims_t sd = { 1, 1, N, H };
  CHECK(dnnl_memory_desc_init_by_tag(&sIter, 4, sd, dnnl_f32, dnnl_ldnc));
  (void)sIter;
  dnnl_rnn_desc_t fd, bd;
  CHECK(dnnl_lstm_forward_desc_init(&fd, dnnl_forward_training, dnnl_unidirectional_left2right, &src, STATE, STATE,
                                    &wlAny, &wiAny, &bias, &dst, NULL, NULL, 0));
  dnnl_primitive_desc_t fpd, bpd;
  CHECK(dnnl_primitive_desc_create(&fpd, &fd, NULL, engine, NULL));
  CHECK(dnnl_lstm_backward_desc_init(&bd, dnnl_backward, dnnl_unidirectional_left2right, &src, STATE, STATE, &wlAny, &wiAny, &bias,
                                     &dst, NULL, NULL, &diffSrc, STATE, STATE, &wlAny, &wiAny, &diffBias, &diffDst, NULL, NULL, 0));
  CHECK(dnnl_primitive_desc_create(&bpd, &bd, NULL, engine, fpd));
  const char *fimpl, *bimpl;
  dnnl_primitive_desc_query(fpd, dnnl_query_impl_info_str, 0, &fimpl);
  dnnl_primitive_desc_query(bpd, dnnl_query_impl_info_str, 0, &bimpl);

  wl = *dnnl_primitive_desc_query_md(fpd, dnnl_query_weights_md, 0);
  wi = *dnnl_primitive_desc_query_md(fpd, dnnl_query_weights_md, 1);
  const dnnl_memory_desc_t bwl = *dnnl_primitive_desc_query_md(bpd, dnnl_query_weights_md, 0);
  const dnnl_memory_desc_t bwi = *dnnl_primitive_desc_query_md(bpd, dnnl_query_weights_md, 1);
  const dnnl_memory_desc_t dwl = *dnnl_primitive_desc_query_md(bpd, dnnl_query_diff_weights_md, 0);
  const dnnl_memory_desc_t dwi = *dnnl_primitive_desc_query_md(bpd, dnnl_query_diff_weights_md, 1);
  const dnnl_memory_desc_t ws = *dnnl_primitive_desc_query_md(fpd, dnnl_query_workspace_md, 0);

  dnnl_memory_t mSrc = memOf(&src), mDst = memOf(&dst), mDiffSrc = memOf(&diffSrc), mDiffDst = memOf(&diffDst);
  dnnl_memory_t mWlUser = memOf(&wlUser), mWiUser = memOf(&wiUser), mDwlUser = memOf(&wlUser), mDwiUser = memOf(&wiUser);
  dnnl_memory_t mWl = memOf(&wl), mWi = memOf(&wi), mBwl = memOf(&bwl), mBwi = memOf(&bwi), mDwl = memOf(&dwl), mDwi = memOf(&dwi);
  dnnl_memory_t mBias = memOf(&bias), mDiffBias = memOf(&diffBias), mWs = memOf(&ws);
  fill(mSrc, &src, 1); fill(mDiffDst, &diffDst, 2); fill(mWlUser, &wlUser, 3); fill(mWiUser, &wiUser, 4); fill(mBias, &bias, 5);

  /* the zero initial state, and the gradients of it (computed, not used) */
  dnnl_memory_t mZero = memOf(&sIter), mDsi = memOf(&sIter), mDsic = memOf(&sIter);
  void *z;
  dnnl_memory_get_data_handle(mZero, &z);
  memset(z, 0, dnnl_memory_desc_get_size(&sIter));
  dnnl_primitive_t fwd, bwd;
  CHECK(dnnl_primitive_create(&fwd, fpd));
  CHECK(dnnl_primitive_create(&bwd, bpd));
  dnnl_exec_arg_t fargs[] = { { DNNL_ARG_SRC_LAYER, mSrc }, { DNNL_ARG_WEIGHTS_LAYER, mWl }, { DNNL_ARG_WEIGHTS_ITER, mWi },
                              { DNNL_ARG_BIAS, mBias }, { DNNL_ARG_DST_LAYER, mDst }, { DNNL_ARG_WORKSPACE, mWs },
                              { DNNL_ARG_SRC_ITER, mZero }, { DNNL_ARG_SRC_ITER_C, mZero } };
  dnnl_exec_arg_t bargs[] = { { DNNL_ARG_SRC_LAYER, mSrc }, { DNNL_ARG_WEIGHTS_LAYER, mBwl }, { DNNL_ARG_WEIGHTS_ITER, mBwi },
                              { DNNL_ARG_BIAS, mBias }, { DNNL_ARG_DST_LAYER, mDst }, { DNNL_ARG_WORKSPACE, mWs },
                              { DNNL_ARG_DIFF_SRC_LAYER, mDiffSrc }, { DNNL_ARG_DIFF_WEIGHTS_LAYER, mDwl },
                              { DNNL_ARG_DIFF_WEIGHTS_ITER, mDwi }, { DNNL_ARG_DIFF_BIAS, mDiffBias },
                              { DNNL_ARG_DIFF_DST_LAYER, mDiffDst }, { DNNL_ARG_SRC_ITER, mZero }, { DNNL_ARG_SRC_ITER_C, mZero },
                              { DNNL_ARG_DIFF_SRC_ITER, mDsi }, { DNNL_ARG_DIFF_SRC_ITER_C, mDsic } };
#ifdef NO_STATE
  const int nf = 6, nb = 11;
#else
  const int nf = 8, nb = 15;
#endif

  double fwdT[9], bwdT[9], all[9];
  for (int r = 0; r < reps; r++) {
    const double t0 = cpuNow();
    reorder(mWlUser, &wlUser, mWl, &wl);
    reorder(mWiUser, &wiUser, mWi, &wi);
    CHECK(dnnl_primitive_execute(fwd, stream, nf, fargs));
    const double t1 = cpuNow();
    reorder(mWlUser, &wlUser, mBwl, &bwl);
    reorder(mWiUser, &wiUser, mBwi, &bwi);
    void *p;
    /* the primitive adds into the weight gradients: zero them (training would accumulate into its own) */
    dnnl_memory_get_data_handle(mDwl, &p); memset(p, 0, dnnl_memory_desc_get_size(&dwl));
    dnnl_memory_get_data_handle(mDwi, &p); memset(p, 0, dnnl_memory_desc_get_size(&dwi));
    dnnl_memory_get_data_handle(mDiffBias, &p); memset(p, 0, dnnl_memory_desc_get_size(&diffBias));
    CHECK(dnnl_primitive_execute(bwd, stream, nb, bargs));
    reorder(mDwl, &dwl, mDwlUser, &wlUser);
    reorder(mDwi, &dwi, mDwiUser, &wiUser);
    const double t2 = cpuNow();
    fwdT[r] = t1 - t0; bwdT[r] = t2 - t1; all[r] = t2 - t0;
  }
  if (reps == 1) {
    float *d;
    dnnl_memory_get_data_handle(mDwi, (void **)&d);
    float m = 0;
    for (size_t i = 0; i < dnnl_memory_desc_get_size(&dwi) / sizeof(float); i++) m = d[i] > m ? d[i] : -d[i] > m ? -d[i] : m;
    printf("check: N=%d T=%d F=%d H=%d, largest |dW_hh| %g (%s)\n", N, T, F, H, m, m == 0 ? "0: right" : "must be 0: wrong");
    return;
  }
  /* the first two are warm-ups */
  qsort(fwdT + 2, 7, sizeof(double), cmp); qsort(bwdT + 2, 7, sizeof(double), cmp); qsort(all + 2, 7, sizeof(double), cmp);
  const double flops = 24.0 * N * T * H * (F + H);
  printf("oneDNN %d.%d.%d LSTM primitive, N=%d T=%d F=%d H=%d, one direction, one thread (median of 7, CPU time)\n",
         dnnl_version()->major, dnnl_version()->minor, dnnl_version()->patch, N, T, F, H);
  printf("  forward: %s\n  backward: %s\n", fimpl, bimpl);
  printf("  forward %.1f ms (%.1f GFLOPS), backward %.1f ms (%.1f GFLOPS), pass %.1f ms: %.1f GFLOPS, %.1f sequences/s\n",
         fwdT[5] * 1e3, flops / 3 / fwdT[5] / 1e9, bwdT[5] * 1e3, flops * 2 / 3 / bwdT[5] / 1e9, all[5] * 1e3, flops / all[5] / 1e9, N / all[5]);
}

int main(void) {
  omp_set_num_threads(1);
  CHECK(dnnl_engine_create(&engine, dnnl_cpu, 0));
  CHECK(dnnl_stream_create(&stream, engine, dnnl_stream_default_flags));
  run(32, 100, 494, 512, 9);
  run(3, 1, 5, 6, 1);
  return 0;
}
