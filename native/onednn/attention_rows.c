/*
 * attention.c's rows between its products: the masked softmax of each query's scores and its
 * backward dS = P ⊙ (dP − rowsum(dP ⊙ P)), as src/kernels/js/attention.ts defines them.
 *
 * With AVX-512, 16 keys at a time in float32: the row maximum, e^(s − max) by Cephes' expf
 * (x = n·ln 2 + r, |r| ≤ ln 2 / 2, a degree-6 polynomial, 2ⁿ applied by vscalefps; within 2 ulp),
 * the sum in 16 lanes, then one multiply by its inverse; masked keys by lane masks, never read.
 * With AVX2 and FMA the same 8 keys at a time (2ⁿ built in the exponent bits, x clamped at −87 so
 * it stays normal: e^−87 ≈ 1.6e−38 where the exact value is smaller), the last keys of a row as
 * scalar float32. Elsewhere (or with setDirect(false), so tests reach it on any CPU) scalar loops in
 * float64, the js kernels' arithmetic.
 */
#include "attention.h"
#include "direct.h"

RowsPath rowsPath(const Instance *inst) {
#ifdef X86
  if (inst->noDirect) return ROWS_SCALAR;
  if (hasAvx512()) return ROWS_AVX512;
  static int avx2 = -1;
  if (avx2 < 0) avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return avx2 ? ROWS_AVX2 : ROWS_SCALAR;
#else
  (void)inst;
  return ROWS_SCALAR;
#endif
}

static void softmaxRowScalar(float *s, int64_t keys, int64_t T) {
  float max = -INFINITY;
  for (int64_t j = 0; j < keys; j++) if (s[j] > max) max = s[j];
  double sum = 0;
  for (int64_t j = 0; j < keys; j++) {
    const double e = exp((double)s[j] - (double)max);
    s[j] = (float)e;
    sum += e;
  }
  const double inv = 1 / sum;
  for (int64_t j = 0; j < keys; j++) s[j] = (float)(s[j] * inv);
  memset(s + keys, 0, (size_t)(T - keys) * sizeof(float));
}

static void scoreGradRowScalar(const float *p, float *dp, int64_t T) {
  double dot = 0;
  for (int64_t j = 0; j < T; j++) dot += (double)dp[j] * (double)p[j];
  for (int64_t j = 0; j < T; j++) dp[j] = (float)((double)p[j] * ((double)dp[j] - dot));
}

#ifdef X86
/* The first n of 16 lanes. */
static inline __mmask16 first(int64_t n) {
  return n >= 16 ? (__mmask16)0xffff : n <= 0 ? 0 : (__mmask16)((1u << n) - 1);
}

/* e^x per lane for x ≤ 0 (larger x is fine up to 88); NaN stays NaN, below −104 gives 0. */
AVX512 static inline __m512 exp16(__m512 x) {
  x = _mm512_max_ps(_mm512_set1_ps(-104.0f), x); /* second operand returned for NaN: NaN kept */
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 q = _mm512_set1_ps(1.9875691500e-4f);
  q = _mm512_fmadd_ps(q, r, _mm512_set1_ps(1.3981999507e-3f));
  q = _mm512_fmadd_ps(q, r, _mm512_set1_ps(8.3334519073e-3f));
  q = _mm512_fmadd_ps(q, r, _mm512_set1_ps(4.1665795894e-2f));
  q = _mm512_fmadd_ps(q, r, _mm512_set1_ps(1.6666665459e-1f));
  q = _mm512_fmadd_ps(q, r, _mm512_set1_ps(5.0000001201e-1f));
  const __m512 e = _mm512_add_ps(_mm512_fmadd_ps(_mm512_mul_ps(q, r), r, r), _mm512_set1_ps(1.0f));
  return _mm512_scalef_ps(e, n);
}

AVX512 static void softmaxRow16(float *s, int64_t keys, int64_t T) {
  __m512 mx = _mm512_set1_ps(-INFINITY);
  for (int64_t j = 0; j < keys; j += 16)
    mx = _mm512_mask_max_ps(mx, first(keys - j), mx, _mm512_maskz_loadu_ps(first(keys - j), s + j));
  const __m512 max = _mm512_set1_ps(_mm512_reduce_max_ps(mx));
  __m512 sum = _mm512_setzero_ps();
  for (int64_t j = 0; j < keys; j += 16) {
    const __mmask16 m = first(keys - j);
    const __m512 e = exp16(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, s + j), max));
    _mm512_mask_storeu_ps(s + j, m, e);
    sum = _mm512_mask_add_ps(sum, m, sum, e);
  }
  const __m512 inv = _mm512_set1_ps(1.0f / _mm512_reduce_add_ps(sum));
  for (int64_t j = 0; j < T; j += 16) {
    const __mmask16 m = first(keys - j), all = first(T - j);
    _mm512_mask_storeu_ps(s + j, all, _mm512_maskz_mul_ps(m, _mm512_maskz_loadu_ps(m, s + j), inv));
  }
}

AVX512 static void scoreGradRow16(const float *p, float *dp, int64_t T) {
  __m512 dot = _mm512_setzero_ps();
  for (int64_t j = 0; j < T; j += 16) {
    const __mmask16 m = first(T - j);
    dot = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, dp + j), _mm512_maskz_loadu_ps(m, p + j), dot);
  }
  const __m512 d = _mm512_set1_ps(_mm512_reduce_add_ps(dot));
  for (int64_t j = 0; j < T; j += 16) {
    const __mmask16 m = first(T - j);
    const __m512 g = _mm512_sub_ps(_mm512_maskz_loadu_ps(m, dp + j), d);
    _mm512_mask_storeu_ps(dp + j, m, _mm512_mul_ps(_mm512_maskz_loadu_ps(m, p + j), g));
  }
}

#define AVX2 __attribute__((target("avx2,fma")))

/* e^x per lane for x ≤ 0: exp16's arithmetic, 2ⁿ made in the exponent bits (x ≥ −87: n ≥ −126). */
AVX2 static inline __m256 exp8(__m256 x) {
  x = _mm256_max_ps(_mm256_set1_ps(-87.0f), x); /* second operand returned for NaN: NaN kept */
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 q = _mm256_set1_ps(1.9875691500e-4f);
  q = _mm256_fmadd_ps(q, r, _mm256_set1_ps(1.3981999507e-3f));
  q = _mm256_fmadd_ps(q, r, _mm256_set1_ps(8.3334519073e-3f));
  q = _mm256_fmadd_ps(q, r, _mm256_set1_ps(4.1665795894e-2f));
  q = _mm256_fmadd_ps(q, r, _mm256_set1_ps(1.6666665459e-1f));
  q = _mm256_fmadd_ps(q, r, _mm256_set1_ps(5.0000001201e-1f));
  const __m256 e = _mm256_add_ps(_mm256_fmadd_ps(_mm256_mul_ps(q, r), r, r), _mm256_set1_ps(1.0f));
  const __m256i bits = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(e, _mm256_castsi256_ps(bits));
}

/* The 8 lanes' sum, and (max8) their maximum. */
AVX2 static inline float sum8(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)));
}
AVX2 static inline float max8(__m256 v) {
  __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_max_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_max_ss(s, _mm_movehdup_ps(s)));
}

AVX2 static void softmaxRow8(float *s, int64_t keys, int64_t T) {
  const int64_t whole = keys & ~(int64_t)7;
  __m256 mx = _mm256_set1_ps(-INFINITY);
  for (int64_t j = 0; j < whole; j += 8) mx = _mm256_max_ps(mx, _mm256_loadu_ps(s + j));
  float maxs = max8(mx);
  for (int64_t j = whole; j < keys; j++) if (s[j] > maxs) maxs = s[j];
  const __m256 max = _mm256_set1_ps(maxs);
  __m256 sum = _mm256_setzero_ps();
  for (int64_t j = 0; j < whole; j += 8) {
    const __m256 e = exp8(_mm256_sub_ps(_mm256_loadu_ps(s + j), max));
    _mm256_storeu_ps(s + j, e);
    sum = _mm256_add_ps(sum, e);
  }
  float total = sum8(sum);
  for (int64_t j = whole; j < keys; j++) {
    s[j] = expf(s[j] - maxs);
    total += s[j];
  }
  const __m256 inv = _mm256_set1_ps(1.0f / total);
  for (int64_t j = 0; j < whole; j += 8) _mm256_storeu_ps(s + j, _mm256_mul_ps(_mm256_loadu_ps(s + j), inv));
  for (int64_t j = whole; j < keys; j++) s[j] *= 1.0f / total;
  memset(s + keys, 0, (size_t)(T - keys) * sizeof(float));
}

AVX2 static void scoreGradRow8(const float *p, float *dp, int64_t T) {
  const int64_t whole = T & ~(int64_t)7;
  __m256 dot = _mm256_setzero_ps();
  for (int64_t j = 0; j < whole; j += 8) dot = _mm256_fmadd_ps(_mm256_loadu_ps(dp + j), _mm256_loadu_ps(p + j), dot);
  float d = sum8(dot);
  for (int64_t j = whole; j < T; j++) d += dp[j] * p[j];
  const __m256 dv = _mm256_set1_ps(d);
  for (int64_t j = 0; j < whole; j += 8)
    _mm256_storeu_ps(dp + j, _mm256_mul_ps(_mm256_loadu_ps(p + j), _mm256_sub_ps(_mm256_loadu_ps(dp + j), dv)));
  for (int64_t j = whole; j < T; j++) dp[j] = p[j] * (dp[j] - d);
}
#endif

void softmaxRows(float *s, int64_t T, int64_t len, bool causal, RowsPath path) {
  for (int64_t i = 0; i < len; i++) {
    const int64_t keys = causal && i + 1 < len ? i + 1 : len;
#ifdef X86
    if (path == ROWS_AVX512) { softmaxRow16(s + i * T, keys, T); continue; }
    if (path == ROWS_AVX2) { softmaxRow8(s + i * T, keys, T); continue; }
#endif
    softmaxRowScalar(s + i * T, keys, T);
  }
  memset(s + len * T, 0, (size_t)((T - len) * T) * sizeof(float));
}

void scoreGradRows(const float *p, float *dp, int64_t rows, int64_t T, RowsPath path) {
  for (int64_t r = 0; r < rows; r++) {
#ifdef X86
    if (path == ROWS_AVX512) { scoreGradRow16(p + r * T, dp + r * T, T); continue; }
    if (path == ROWS_AVX2) { scoreGradRow8(p + r * T, dp + r * T, T); continue; }
#endif
    scoreGradRowScalar(p + r * T, dp + r * T, T);
  }
}
