/*
 * Backend.dropoutForward with AVX-512: inverted dropout whose draws are the Philox4x32-10 stream of
 * src/tensor/rng.ts (CounterRng.at), the same numbers, masks and outputs as every backend's
 * (src/kernels/js/dropout.ts is the definition): draw i is number counter + i of the stream keyed
 * (k0, k1), the four numbers of block b = ⌊number / 4⌋ in order; mask[i] = scale where the draw is
 * below keep·2³², else 0; y[i] = x[i]·mask[i] in float64, rounded once (so fp-contract off).
 *
 * 16 blocks at a time, one to a 32-bit lane (64 draws). A round's 32×32 → 64-bit products come from
 * two even-lane multiplies (vpmuludq), their halves put back in place by blends. Each of the four
 * outputs is compared in its lane, and the four 16-bit masks are interleaved (pdep) into the 64 draws'
 * order. The wasm kernel (assembly/dropout.ts), 4 blocks in 128-bit lanes, took 3 ns a draw on a
 * Zen 4; this is what the onednn backend runs where it has AVX-512 (as direct.h decides), and the
 * base's wasm kernel elsewhere (the call answers false).
 */
#pragma GCC optimize("fp-contract=off")
#include <math.h>
#include "direct.h"

#define M0 0xd2511f53u
#define M1 0xcd9e8d57u
#define W0 0x9e3779b9u
#define W1 0xbb67ae85u

/* Block b's four numbers. */
static void philoxBlock(uint32_t k0, uint32_t k1, uint64_t b, uint32_t out[4]) {
  uint32_t c0 = (uint32_t)b, c1 = (uint32_t)(b >> 32), c2 = 0, c3 = 0;
  for (int round = 0; round < 10; round++) {
    const uint64_t p0 = (uint64_t)M0 * c0, p1 = (uint64_t)M1 * c2;
    const uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1 ^ k0, n2 = (uint32_t)(p0 >> 32) ^ c3 ^ k1;
    c0 = n0; c1 = (uint32_t)p1; c2 = n2; c3 = (uint32_t)p0;
    k0 += W0; k1 += W1;
  }
  out[0] = c0; out[1] = c1; out[2] = c2; out[3] = c3;
}

/* Element j from draw u (u < bound keeps it; `all` keeps every one). */
static inline void put(int64_t j, uint32_t u, bool all, uint64_t bound, double scale, const float *x, float *mask, float *y) {
  const double m = all || u < bound ? scale : 0.0;
  mask[j] = (float)m;
  y[j] = (float)((double)x[j] * m);
}

#ifdef X86
#define V __attribute__((target("avx512f,avx512dq,bmi2")))

/* Each lane's 32×32 → 64-bit product m·c: its high and low halves in the lane. */
V static inline void mulHiLo(__m512i m, __m512i c, __m512i *hi, __m512i *lo) {
  const __m512i even = _mm512_mul_epu32(m, c), odd = _mm512_mul_epu32(m, _mm512_srli_epi64(c, 32));
  *hi = _mm512_mask_blend_epi32(0xAAAA, _mm512_srli_epi64(even, 32), odd);
  *lo = _mm512_mask_blend_epi32(0xAAAA, even, _mm512_slli_epi64(odd, 32));
}

/* 16 draws at j (element j + e kept where bit e of `kept`): mask and y. */
V static inline void putSixteen(uint32_t kept, __m512 scale32, __m512d scale64, const float *x, float *mask, float *y) {
  const __mmask16 k = (__mmask16)kept;
  _mm512_storeu_ps(mask, _mm512_maskz_mov_ps(k, scale32));
  const __m512 xs = _mm512_loadu_ps(x);
  const __m512d lo = _mm512_mul_pd(_mm512_cvtps_pd(_mm512_castps512_ps256(xs)), _mm512_maskz_mov_pd((__mmask8)kept, scale64));
  const __m512d hi = _mm512_mul_pd(_mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(xs), 1))),
                                   _mm512_maskz_mov_pd((__mmask8)(kept >> 8), scale64));
  _mm512_storeu_ps(y, _mm512_insertf32x8(_mm512_castps256_ps512(_mm512_cvtpd_ps(lo)), _mm512_cvtpd_ps(hi), 1));
}

/* Draws of blocks b … b + 15 (64 of them, in order) at x, mask, y. */
V static void sixteenBlocks(uint32_t k0, uint32_t k1, uint64_t b, bool all, uint32_t bound, double scale,
                            const float *x, float *mask, float *y) {
  uint32_t lo[16], hi[16];
  for (int l = 0; l < 16; l++) { lo[l] = (uint32_t)(b + (uint64_t)l); hi[l] = (uint32_t)((b + (uint64_t)l) >> 32); }
  __m512i c0 = _mm512_loadu_si512(lo), c1 = _mm512_loadu_si512(hi), c2 = _mm512_setzero_si512(), c3 = _mm512_setzero_si512();
  const __m512i m0 = _mm512_set1_epi32((int)M0), m1 = _mm512_set1_epi32((int)M1);
  for (int round = 0; round < 10; round++) {
    __m512i hi0, lo0, hi1, lo1;
    mulHiLo(m0, c0, &hi0, &lo0);
    mulHiLo(m1, c2, &hi1, &lo1);
    const __m512i key0 = _mm512_set1_epi32((int)(k0 + (uint32_t)round * W0)), key1 = _mm512_set1_epi32((int)(k1 + (uint32_t)round * W1));
    /* 0x96: a ^ b ^ c */
    c0 = _mm512_ternarylogic_epi32(hi1, c1, key0, 0x96);
    c2 = _mm512_ternarylogic_epi32(hi0, c3, key1, 0x96);
    c1 = lo1; c3 = lo0;
  }
  const __m512i bnd = _mm512_set1_epi32((int)bound);
  const uint64_t k[4] = {
    all ? 0xffff : _mm512_cmplt_epu32_mask(c0, bnd), all ? 0xffff : _mm512_cmplt_epu32_mask(c1, bnd),
    all ? 0xffff : _mm512_cmplt_epu32_mask(c2, bnd), all ? 0xffff : _mm512_cmplt_epu32_mask(c3, bnd) };
  /* draw 4l + o is output o of lane l */
  const uint64_t kept = _pdep_u64(k[0], 0x1111111111111111ull) | _pdep_u64(k[1], 0x2222222222222222ull) |
                        _pdep_u64(k[2], 0x4444444444444444ull) | _pdep_u64(k[3], 0x8888888888888888ull);
  const __m512 s32 = _mm512_set1_ps((float)scale);
  const __m512d s64 = _mm512_set1_pd(scale);
  for (int q = 0; q < 4; q++) putSixteen((uint32_t)(kept >> (16 * q)) & 0xffff, s32, s64, x + 16 * q, mask + 16 * q, y + 16 * q);
}

/* The whole call: single draws up to a block boundary, 64 at a time, then single draws again. */
V static void forward(uint32_t k0, uint32_t k1, uint64_t c, int64_t n, double keep, double scale, const float *x, float *mask, float *y) {
  /* draw u is kept where u·2⁻³² < keep, that is u < ⌈keep·2³²⌉ (an integer; 2³² keeps all) */
  const double bd = ceil(keep * 4294967296.0);
  const bool all = bd >= 4294967296.0;
  const uint64_t bound = all || !(bd > 0) ? 0 : (uint64_t)bd; /* a NaN keep keeps none, as the definition */
  int64_t j = 0;
  while (j < n) {
    if ((c & 3) == 0 && j + 64 <= n) {
      sixteenBlocks(k0, k1, c >> 2, all, (uint32_t)bound, scale, x + j, mask + j, y + j);
      j += 64; c += 64;
      continue;
    }
    uint32_t u[4];
    philoxBlock(k0, k1, c >> 2, u);
    for (int o = (int)(c & 3); o < 4 && j < n; o++, j++, c++) put(j, u[o], all, bound, scale, x, mask, y);
  }
}
#endif

/* dropoutForward(k0, k1, counter, n, keep, scale, x, mask, y) → done? (false without AVX-512: the base's kernel runs) */
napi_value DropoutForward(napi_env env, napi_callback_info info) {
  static const char *const fn = "dropoutForward";
  napi_value argv[9];
  if (!getArgs(env, info, 9, argv, "dropoutForward(k0, k1, counter, n, keep, scale, x, mask, y)")) return NULL;
  static const char *const names[] = { "k0", "k1", "counter", "n", "keep", "scale" };
  static const double limits[] = { 4294967296.0, 4294967296.0, 9007199254740992.0, 2147483648.0 };
  double v[6];
  for (int i = 0; i < 6; i++) {
    if (!getNumber(env, argv[i], fn, names[i], &v[i])) return NULL;
    if (i < 4 && !(v[i] >= 0 && v[i] < limits[i] && v[i] == floor(v[i]))) {
      char msg[160];
      snprintf(msg, sizeof msg, "%s: %s must be an integer in [0, %.0f), got %g", fn, names[i], limits[i], v[i]);
      napi_throw_range_error(env, NULL, msg);
      return NULL;
    }
  }
  const int64_t n = (int64_t)v[3];
  static const char *const arrays[] = { "x", "mask", "y" };
  float *a[3];
  for (int i = 0; i < 3; i++) {
    size_t len;
    if (!getF32(env, argv[6 + i], fn, arrays[i], false, &a[i], &len) || !need(env, fn, arrays[i], len, n)) return NULL;
  }
#ifdef X86
  if (!hasAvx512() || !__builtin_cpu_supports("bmi2") || !__builtin_cpu_supports("avx512dq")) return boolValue(env, false);
  forward((uint32_t)v[0], (uint32_t)v[1], (uint64_t)v[2], n, v[4], v[5], a[0], a[1], a[2]);
  return boolValue(env, true);
#else
  (void)put; (void)philoxBlock;
  return boolValue(env, false);
#endif
}
