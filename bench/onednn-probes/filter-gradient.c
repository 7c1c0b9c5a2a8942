/*
 * Why native/onednn/gemmconv.c computes filter gradients as im2col + dnnl_sgemm without AVX-512:
 * mnist-small's conv2 (batch 64, 13²×32 → 11²×64, 3×3), dw[K×F] += colᵀ·dy over chunks of output
 * pixels, against every backward-weights implementation oneDNN offers for the shape (its
 * reference one skipped), one thread.
 *
 *   gcc -O2 -o /tmp/filter-gradient bench/onednn-probes/filter-gradient.c -ldnnl -fopenmp && /tmp/filter-gradient
 */
#include <omp.h>
#include <oneapi/dnnl/dnnl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { N = 64, H = 13, W = 13, C = 32, F = 64, KH = 3, KW = 3, OH = 11, OW = 11, K = KH * KW * C, P = N * OH * OW };

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

static void fill(float *p, size_t n) {
  for (size_t j = 0; j < n; j++) p[j] = (float)((j * 7919) % 1000) / 1000.f - 0.5f;
}

static void primitives(double flops) {
  dnnl_engine_t eng;
  dnnl_stream_t st;
  dnnl_engine_create(&eng, dnnl_cpu, 0);
  dnnl_stream_create(&st, eng, dnnl_stream_default_flags);
  dnnl_memory_desc_t s, w, d, b;
  const dnnl_dims_t sd = { N, C, H, W }, wd = { F, C, KH, KW }, dd = { N, F, OH, OW }, bd = { F }, str = { 1, 1 }, pad = { 0, 0 };
  dnnl_memory_desc_init_by_tag(&s, 4, sd, dnnl_f32, dnnl_nhwc);
  dnnl_memory_desc_init_by_tag(&w, 4, wd, dnnl_f32, dnnl_format_tag_any);
  dnnl_memory_desc_init_by_tag(&d, 4, dd, dnnl_f32, dnnl_nhwc);
  dnnl_memory_desc_init_by_tag(&b, 1, bd, dnnl_f32, dnnl_a);
  dnnl_convolution_desc_t fwd, bwd;
  dnnl_primitive_desc_t hint;
  dnnl_convolution_forward_desc_init(&fwd, dnnl_forward_training, dnnl_convolution_direct, &s, &w, &b, &d, str, pad, pad);
  dnnl_primitive_desc_create(&hint, &fwd, NULL, eng, NULL);
  dnnl_convolution_backward_weights_desc_init(&bwd, dnnl_convolution_direct, &s, &w, &b, &d, str, pad, pad);
  dnnl_primitive_desc_iterator_t it;
  if (dnnl_primitive_desc_iterator_create(&it, &bwd, NULL, eng, hint) != dnnl_success) return;
  const int kinds[] = { DNNL_ARG_SRC, DNNL_ARG_DIFF_DST, DNNL_ARG_DIFF_WEIGHTS, DNNL_ARG_DIFF_BIAS };
  do {
    dnnl_primitive_desc_t pd = dnnl_primitive_desc_iterator_fetch(it);
    const char *impl;
    dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl);
    if (strstr(impl, "ref")) { dnnl_primitive_desc_destroy(pd); continue; }
    dnnl_primitive_t prim;
    dnnl_primitive_create(&prim, pd);
    dnnl_memory_t mems[4];
    dnnl_exec_arg_t args[4];
    for (int i = 0; i < 4; i++) {
      const dnnl_memory_desc_t *md = dnnl_primitive_desc_query_md(pd, dnnl_query_exec_arg_md, kinds[i]);
      void *h;
      dnnl_memory_create(&mems[i], md, eng, DNNL_MEMORY_ALLOCATE);
      dnnl_memory_get_data_handle(mems[i], &h);
      fill(h, dnnl_memory_desc_get_size(md) / 4);
      args[i] = (dnnl_exec_arg_t){ kinds[i], mems[i] };
    }
    double best = 1e9;
    for (int r = 0; r < 9; r++) {
      const double t0 = now();
      dnnl_primitive_execute(prim, st, 4, args);
      dnnl_stream_wait(st);
      const double t = now() - t0;
      if (t < best) best = t;
    }
    printf("oneDNN primitive %-24s %6.1f GFLOPS\n", impl, flops / best / 1e9);
    for (int i = 0; i < 4; i++) dnnl_memory_destroy(mems[i]);
    dnnl_primitive_destroy(prim);
    dnnl_primitive_desc_destroy(pd);
  } while (dnnl_primitive_desc_iterator_next(it) == dnnl_success);
}

int main(void) {
  omp_set_num_threads(1);
  float *x = malloc(sizeof(float) * N * H * W * C), *dy = malloc(sizeof(float) * P * F), *dw = malloc(sizeof(float) * K * F);
  fill(x, (size_t)N * H * W * C);
  fill(dy, (size_t)P * F);
  const double flops = 2.0 * P * K * F;
  const int chunk = 455; /* 128 K floats of col, as gemmconv.c */
  float *col = malloc(sizeof(float) * chunk * K);
  double best = 1e9;
  for (int r = 0; r < 9; r++) {
    const double t0 = now();
    for (int p0 = 0; p0 < P; p0 += chunk) {
      const int np = P - p0 < chunk ? P - p0 : chunk;
      for (int p = 0; p < np; p++) {
        const int q = p0 + p, n = q / (OH * OW), oh = q / OW % OH, ow = q % OW;
        for (int kh = 0; kh < KH; kh++) memcpy(col + (size_t)p * K + kh * KW * C, x + ((size_t)(n * H + oh + kh) * W + ow) * C, sizeof(float) * KW * C);
      }
      dnnl_sgemm('T', 'N', K, F, np, 1.f, col, K, dy + (size_t)p0 * F, F, 1.f, dw, F);
    }
    const double t = now() - t0;
    if (t < best) best = t;
  }
  printf("im2col + dnnl_sgemm                        %6.1f GFLOPS\n", flops / best / 1e9);
  primitives(flops);
  return 0;
}
