/*
 * Batch normalisation's passes over x [rows, C] (channels last), per channel:
 * Backend.channelCentredSquares, batchNormNormalise, batchNormGradSums, batchNormInputGrad. oneDNN's
 * batch_normalization primitive computes its statistics itself, which leaves no place for the
 * synchronised layer's reduction between the passes, and rounds its own way; these keep the
 * contract every backend keeps (src/kernels/js/batchNorm.ts is the definition): float64
 * arithmetic, each result rounded to float32 once, sums over the rows in order, bit for bit the js
 * backend's. So no multiply and add may be fused here (fp-contract off for this file).
 *
 * With AVX-512 (as direct.h decides: the CPU has it and oneDNN dispatches it), 8 channels a step
 * as float64 vectors, the rest of a row's channels one by one; without it the calls answer false
 * and the base backend's wasm kernels (two channels a step) run. On resnet-small's first batch
 * norm (64·28·28 rows of 8 channels) the wasm kernels took 1.0 ms forward and 0.8 backward.
 */
#pragma GCC optimize("fp-contract=off")
#include <stdlib.h>
#include "direct.h"

#ifdef X86
#define V AVX512

/* 8 floats at p as float64. */
V static inline __m512d load8(const float *p) {
  return _mm512_cvtps_pd(_mm256_loadu_ps(p));
}

/* 8 float64 rounded to floats at p. */
V static inline void store8(float *p, __m512d v) {
  _mm256_storeu_ps(p, _mm512_cvtpd_ps(v));
}

V static void centredSquares(const float *x, const float *mean, float *out, int64_t rows, int64_t C, double *acc) {
  const int64_t C8 = C & ~(int64_t)7;
  for (int64_t r = 0; r < rows; r++) {
    const float *row = x + r * C;
    int64_t c = 0;
    for (; c < C8; c += 8) {
      const __m512d d = _mm512_sub_pd(load8(row + c), load8(mean + c));
      _mm512_storeu_pd(acc + c, _mm512_add_pd(_mm512_loadu_pd(acc + c), _mm512_mul_pd(d, d)));
    }
    for (; c < C; c++) { const double d = (double)row[c] - (double)mean[c]; acc[c] += d * d; }
  }
  for (int64_t c = 0; c < C; c++) out[c] = (float)acc[c];
}

V static void normalise(const float *x, const float *mean, const float *invStd, const float *gamma, const float *beta,
                        float *xhat, float *y, int64_t rows, int64_t C) {
  const int64_t C8 = C & ~(int64_t)7;
  for (int64_t r = 0; r < rows; r++) {
    const int64_t o = r * C;
    int64_t c = 0;
    for (; c < C8; c += 8) {
      const __m512d h = _mm512_mul_pd(_mm512_sub_pd(load8(x + o + c), load8(mean + c)), load8(invStd + c));
      store8(xhat + o + c, h);
      store8(y + o + c, _mm512_add_pd(_mm512_mul_pd(h, load8(gamma + c)), load8(beta + c)));
    }
    for (; c < C; c++) {
      const double h = ((double)x[o + c] - (double)mean[c]) * (double)invStd[c];
      xhat[o + c] = (float)h;
      y[o + c] = (float)(h * (double)gamma[c] + (double)beta[c]);
    }
  }
}

V static void gradSums(const float *dy, const float *xhat, float *out, int64_t rows, int64_t C, double *acc) {
  const int64_t C8 = C & ~(int64_t)7;
  double *dot = acc + C;
  for (int64_t r = 0; r < rows; r++) {
    const int64_t o = r * C;
    int64_t c = 0;
    for (; c < C8; c += 8) {
      const __m512d g = load8(dy + o + c);
      _mm512_storeu_pd(acc + c, _mm512_add_pd(_mm512_loadu_pd(acc + c), g));
      _mm512_storeu_pd(dot + c, _mm512_add_pd(_mm512_loadu_pd(dot + c), _mm512_mul_pd(g, load8(xhat + o + c))));
    }
    for (; c < C; c++) { const double g = dy[o + c]; acc[c] += g; dot[c] += g * (double)xhat[o + c]; }
  }
  for (int64_t c = 0; c < 2 * C; c++) out[c] = (float)acc[c];
}

V static void inputGrad(const float *dy, const float *xhat, const float *gamma, const float *invStd, const float *sums, double M,
                        float *dx, int64_t rows, int64_t C, double *k) {
  const int64_t C8 = C & ~(int64_t)7;
  for (int64_t c = 0; c < C; c++) k[c] = (double)gamma[c] * (double)invStd[c] / M;
  const __m512d m = _mm512_set1_pd(M);
  for (int64_t r = 0; r < rows; r++) {
    const int64_t o = r * C;
    int64_t c = 0;
    for (; c < C8; c += 8) {
      const __m512d t = _mm512_sub_pd(_mm512_sub_pd(_mm512_mul_pd(m, load8(dy + o + c)), load8(sums + c)),
                                      _mm512_mul_pd(load8(xhat + o + c), load8(sums + C + c)));
      store8(dx + o + c, _mm512_mul_pd(_mm512_loadu_pd(k + c), t));
    }
    for (; c < C; c++) {
      const double t = M * (double)dy[o + c] - (double)sums[c] - (double)xhat[o + c] * (double)sums[C + c];
      dx[o + c] = (float)(k[c] * t);
    }
  }
}
#endif

enum { CENTRED_SQUARES, NORMALISE, GRAD_SUMS, INPUT_GRAD };

/* Reads the call's arrays (counts: rows·C for the per-element ones, C or 2C for the per-channel ones) and runs `which`. */
static napi_value call(napi_env env, napi_callback_info info, int which) {
  static const char *const fns[] = { "channelCentredSquares", "batchNormNormalise", "batchNormGradSums", "batchNormInputGrad" };
  static const char *const usage[] = {
    "channelCentredSquares(x, mean, out, rows, C)", "batchNormNormalise(x, mean, invStd, gamma, beta, xhat, y, rows, C)",
    "batchNormGradSums(dy, xhat, out, rows, C)", "batchNormInputGrad(dy, xhat, gamma, invStd, sums, M, dx, rows, C)" };
  /* per array: its name and its length: rows·C (0), C (1) or 2C (2) */
  static const char *const names[4][7] = {
    { "x", "mean", "out" }, { "x", "mean", "invStd", "gamma", "beta", "xhat", "y" }, { "dy", "xhat", "out" },
    { "dy", "xhat", "gamma", "invStd", "sums", "dx" } };
  static const int sizes[4][7] = { { 0, 1, 1 }, { 0, 1, 1, 1, 1, 0, 0 }, { 0, 0, 2 }, { 0, 0, 1, 1, 2, 0 } };
  static const int arrays[] = { 3, 7, 3, 6 };
  const char *fn = fns[which];
  const int n = arrays[which], extra = which == INPUT_GRAD ? 1 : 0;
  napi_value argv[10];
  if (!getArgs(env, info, (size_t)(n + 2 + extra), argv, usage[which])) return NULL;
  static const char *const dims[] = { "rows", "C" };
  int64_t s[2];
  if (!getInts(env, argv + n + extra, 2, fn, dims, s)) return NULL;
  double M = 0;
  if (extra && !getNumber(env, argv[5], fn, "M", &M)) return NULL;
  const int64_t rows = s[0], C = s[1];
  float *a[7];
  for (int i = 0, v = 0; i < n; i++, v++) {
    if (extra && v == 5) v++; /* M sits between sums and dx */
    size_t len;
    const int64_t want = sizes[which][i] == 0 ? rows * C : sizes[which][i] * C;
    if (!getF32(env, argv[v], fn, names[which][i], false, &a[i], &len) || !need(env, fn, names[which][i], len, want)) return NULL;
  }
#ifdef X86
  if (!hasAvx512()) return boolValue(env, false);
  double *acc = calloc((size_t)(2 * C + 1), sizeof(double));
  if (!acc) return boolValue(env, false);
  switch (which) {
    case CENTRED_SQUARES: centredSquares(a[0], a[1], a[2], rows, C, acc); break;
    case NORMALISE: normalise(a[0], a[1], a[2], a[3], a[4], a[5], a[6], rows, C); break;
    case GRAD_SUMS: gradSums(a[0], a[1], a[2], rows, C, acc); break;
    default: inputGrad(a[0], a[1], a[2], a[3], a[4], M, a[5], rows, C, acc); break;
  }
  free(acc);
  return boolValue(env, true);
#else
  return boolValue(env, false);
#endif
}

napi_value ChannelCentredSquares(napi_env env, napi_callback_info info) { return call(env, info, CENTRED_SQUARES); }
napi_value BatchNormNormalise(napi_env env, napi_callback_info info) { return call(env, info, NORMALISE); }
napi_value BatchNormGradSums(napi_env env, napi_callback_info info) { return call(env, info, GRAD_SUMS); }
napi_value BatchNormInputGrad(napi_env env, napi_callback_info info) { return call(env, info, INPUT_GRAD); }
