/*
 * Why native/onednn/gemm.c pads rows 512 floats apart: dnnl_sgemm (NN) at shapes of the benchmarks
 * and of alexnet-small's dense layers, B as given and copied into rows 16 floats longer (the copy
 * counted), one thread.
 *
 *   gcc -O2 -o /tmp/aliasing bench/onednn-probes/aliasing.c -ldnnl -fopenmp && /tmp/aliasing
 */
#include <omp.h>
#include <oneapi/dnnl/dnnl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

static void run(int M, int N, int K) {
  for (int pad = 0; pad <= 16; pad += 16) {
    const int ld = N + pad;
    /* 64-byte aligned, as the wasm heap's blocks: where the operands lie decides how their rows collide */
    float *a = aligned_alloc(64, 4 * (size_t)M * K), *b = aligned_alloc(64, 4 * (size_t)K * N), *bp = aligned_alloc(64, 4 * (size_t)K * ld),
          *c = aligned_alloc(64, 4 * (size_t)M * N);
    memset(c, 0, 4 * (size_t)M * N);
    for (long j = 0; j < (long)M * K; j++) a[j] = (j % 7) * .1f;
    for (long j = 0; j < (long)K * N; j++) b[j] = (j % 5) * .1f;
    double best = 1e9;
    for (int r = 0; r < 9; r++) {
      const double t0 = now();
      const float *B = b;
      if (pad) {
        for (int k = 0; k < K; k++) memcpy(bp + (long)k * ld, b + (long)k * N, 4L * N);
        B = bp;
      }
      dnnl_sgemm('N', 'N', M, N, K, 1.f, a, K, B, ld, 0.f, c, N);
      const double t = now() - t0;
      if (t < best) best = t;
    }
    printf("M=%d N=%d K=%d %-22s %.1f GFLOPS\n", M, N, K, pad ? "B copied to rows +16" : "B as is", 2.0 * M * N * K / best / 1e9);
    free(a); free(b); free(bp); free(c);
  }
}

int main(void) {
  omp_set_num_threads(1);
  run(512, 512, 512);
  run(64, 1024, 1024);
  run(64, 512, 1600);
  run(1024, 1024, 1024);
  return 0;
}
