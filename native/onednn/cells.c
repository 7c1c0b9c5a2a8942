/*
 * The LSTM cell's element-wise step (Backend.lstmCellForward / lstmCellBackward) with AVX2 and
 * FMA, 8 units at a time. oneDNN has no primitive for one step's cell on the caller's buffers; the
 * wasm cells do 4 units at a time and took 22 ms forward and 14 ms backward per pass at
 * DeepSpeech's shapes (N 32, H 512, 100 frames) on a Zen 3.
 *
 * The arithmetic is the wasm kernels' (assembly/recurrent.ts, assembly/vmath.ts): Cephes'
 * single-precision expf and tanhf, a few ulp from the float64 reference (src/kernels/js/
 * recurrent.ts); units past the last multiple of 8 in double, as the reference does. NaN in gives
 * NaN out: the clamps put x second in max/min, which return their second operand when either is
 * NaN. Without AVX2 and FMA (or off x86-64) the calls answer false and the base backend's cells run.
 */
#include <math.h>
#include <string.h>
#include "onednn.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define CELLS 1
#define TARGET __attribute__((target("avx2,fma")))
#define SPLAT _mm256_set1_ps

static bool hasCells(void) {
  static int ok = -1;
  if (ok < 0) ok = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return ok;
}

/* e^x, x clamped to [−87, 88] so 2^n stays a normal float; range reduction by ln 2 in two parts. */
TARGET static inline __m256 vexp(__m256 x) {
  x = _mm256_min_ps(SPLAT(88.0f), _mm256_max_ps(SPLAT(-87.0f), x));
  const __m256 fx = _mm256_round_ps(_mm256_mul_ps(x, SPLAT(1.44269504088896341f)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(fx, SPLAT(0.693359375f), x);
  r = _mm256_fnmadd_ps(fx, SPLAT(-2.12194440e-4f), r);
  __m256 p = SPLAT(1.9875691500e-4f);
  p = _mm256_fmadd_ps(p, r, SPLAT(1.3981999507e-3f));
  p = _mm256_fmadd_ps(p, r, SPLAT(8.3334519073e-3f));
  p = _mm256_fmadd_ps(p, r, SPLAT(4.1665795894e-2f));
  p = _mm256_fmadd_ps(p, r, SPLAT(1.6666665459e-1f));
  p = _mm256_fmadd_ps(p, r, SPLAT(5.0000001201e-1f));
  p = _mm256_add_ps(_mm256_fmadd_ps(p, _mm256_mul_ps(r, r), r), SPLAT(1.0f));
  const __m256i pow2 = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvttps_epi32(fx), _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(p, _mm256_castsi256_ps(pow2));
}

TARGET static inline __m256 vsigmoid(__m256 x) {
  return _mm256_div_ps(SPLAT(1.0f), _mm256_add_ps(SPLAT(1.0f), vexp(_mm256_xor_ps(x, SPLAT(-0.0f)))));
}

/* |x| < 0.625: x + x³·P(x²); else 1 − 2/(e^{2|x|} + 1) with x's sign. */
TARGET static inline __m256 vtanh(__m256 x) {
  const __m256 sign = SPLAT(-0.0f), ax = _mm256_andnot_ps(sign, x), z = _mm256_mul_ps(x, x);
  __m256 p = SPLAT(-5.70498872745e-3f);
  p = _mm256_fmadd_ps(p, z, SPLAT(2.06390887954e-2f));
  p = _mm256_fmadd_ps(p, z, SPLAT(-5.37397155531e-2f));
  p = _mm256_fmadd_ps(p, z, SPLAT(1.33314422036e-1f));
  p = _mm256_fmadd_ps(p, z, SPLAT(-3.33332819422e-1f));
  const __m256 small = _mm256_fmadd_ps(_mm256_mul_ps(p, z), x, x);
  const __m256 e = vexp(_mm256_add_ps(ax, ax));
  const __m256 big = _mm256_sub_ps(SPLAT(1.0f), _mm256_div_ps(SPLAT(2.0f), _mm256_add_ps(e, SPLAT(1.0f))));
  const __m256 bigSigned = _mm256_or_ps(_mm256_and_ps(x, sign), big);
  return _mm256_blendv_ps(bigSigned, small, _mm256_cmp_ps(ax, SPLAT(0.625f), _CMP_LT_OQ));
}

static inline float sig1(float v) { return (float)(1.0 / (1.0 + exp(-(double)v))); }
static inline float th1(float v) { return (float)tanh((double)v); }

TARGET static void lstmForward(int64_t t, int64_t N, int64_t H, float *gates, float *c, float *h, const int32_t *lengths) {
  const int64_t NH = N * H, G4 = 4 * H, H8 = H & ~(int64_t)7;
  for (int64_t n = 0; n < N; n++) {
    const int64_t prev = t * NH + n * H, out = prev + NH;
    const float *cp = c + prev;
    float *co = c + out, *ho = h + out;
    if (t >= lengths[n]) { memset(co, 0, (size_t)H * sizeof(float)); memset(ho, 0, (size_t)H * sizeof(float)); continue; }
    float *gi = gates + (t * N + n) * G4, *gf = gi + H, *gg = gf + H, *go = gg + H;
    int64_t j = 0;
    for (; j < H8; j += 8) {
      const __m256 i = vsigmoid(_mm256_loadu_ps(gi + j)), f = vsigmoid(_mm256_loadu_ps(gf + j));
      const __m256 g = vtanh(_mm256_loadu_ps(gg + j)), o = vsigmoid(_mm256_loadu_ps(go + j));
      _mm256_storeu_ps(gi + j, i); _mm256_storeu_ps(gf + j, f); _mm256_storeu_ps(gg + j, g); _mm256_storeu_ps(go + j, o);
      const __m256 cv = _mm256_add_ps(_mm256_mul_ps(f, _mm256_loadu_ps(cp + j)), _mm256_mul_ps(i, g));
      _mm256_storeu_ps(co + j, cv);
      _mm256_storeu_ps(ho + j, _mm256_mul_ps(o, vtanh(cv)));
    }
    for (; j < H; j++) {
      const float i = sig1(gi[j]), f = sig1(gf[j]), g = th1(gg[j]), o = sig1(go[j]);
      gi[j] = i; gf[j] = f; gg[j] = g; go[j] = o;
      const float cv = f * cp[j] + i * g;
      co[j] = cv;
      ho[j] = o * th1(cv);
    }
  }
}

TARGET static void lstmBackward(int64_t t, int64_t N, int64_t H, const float *gates, const float *c, const float *dh,
                                float *dc, float *dz, const int32_t *lengths) {
  const int64_t NH = N * H, G4 = 4 * H, H8 = H & ~(int64_t)7;
  const __m256 one = SPLAT(1.0f);
  for (int64_t n = 0; n < N; n++) {
    const int64_t zb = t * N * G4 + n * G4;
    float *dcr = dc + n * H;
    if (t >= lengths[n]) { memset(dz + zb, 0, (size_t)G4 * sizeof(float)); memset(dcr, 0, (size_t)H * sizeof(float)); continue; }
    const int64_t prev = t * NH + n * H, cur = prev + NH;
    const float *gi = gates + zb, *gf = gi + H, *gg = gf + H, *go = gg + H;
    float *di = dz + zb, *df = di + H, *dg = df + H, *dout = dg + H;
    const float *cp = c + prev, *cc = c + cur, *dhr = dh + cur;
    int64_t j = 0;
    for (; j < H8; j += 8) {
      const __m256 i = _mm256_loadu_ps(gi + j), f = _mm256_loadu_ps(gf + j), g = _mm256_loadu_ps(gg + j), o = _mm256_loadu_ps(go + j);
      const __m256 dhv = _mm256_loadu_ps(dhr + j), tc = vtanh(_mm256_loadu_ps(cc + j));
      const __m256 dcv = _mm256_add_ps(_mm256_loadu_ps(dcr + j), _mm256_mul_ps(_mm256_mul_ps(dhv, o), _mm256_sub_ps(one, _mm256_mul_ps(tc, tc))));
      _mm256_storeu_ps(di + j, _mm256_mul_ps(_mm256_mul_ps(dcv, g), _mm256_mul_ps(i, _mm256_sub_ps(one, i))));
      _mm256_storeu_ps(df + j, _mm256_mul_ps(_mm256_mul_ps(dcv, _mm256_loadu_ps(cp + j)), _mm256_mul_ps(f, _mm256_sub_ps(one, f))));
      _mm256_storeu_ps(dg + j, _mm256_mul_ps(_mm256_mul_ps(dcv, i), _mm256_sub_ps(one, _mm256_mul_ps(g, g))));
      _mm256_storeu_ps(dout + j, _mm256_mul_ps(_mm256_mul_ps(dhv, tc), _mm256_mul_ps(o, _mm256_sub_ps(one, o))));
      _mm256_storeu_ps(dcr + j, _mm256_mul_ps(dcv, f));
    }
    for (; j < H; j++) {
      const float i = gi[j], f = gf[j], g = gg[j], o = go[j];
      const float dhv = dhr[j], tc = th1(cc[j]);
      const float dcv = dcr[j] + dhv * o * (1 - tc * tc);
      di[j] = dcv * g * i * (1 - i);
      df[j] = dcv * cp[j] * f * (1 - f);
      dg[j] = dcv * i * (1 - g * g);
      dout[j] = dhv * tc * o * (1 - o);
      dcr[j] = dcv * f;
    }
  }
}
#endif

static const char *const SHAPE[] = { "t", "N", "H" };

/* lstmCellForward(t, N, H, gates, c, h, lengths) → done? (false: no AVX2 and FMA here) */
napi_value LstmCellForward(napi_env env, napi_callback_info info) {
  const char *fn = "lstmCellForward";
  napi_value argv[7];
  if (!getArgs(env, info, 7, argv, "lstmCellForward(t, N, H, gates, c, h, lengths)")) return NULL;
  int64_t s[3];
  float *gates, *c, *h;
  int32_t *lengths;
  size_t lg, lc, lh, ll;
  if (!getInts(env, argv, 3, fn, SHAPE, s) || !getF32(env, argv[3], fn, "gates", false, &gates, &lg) ||
      !getF32(env, argv[4], fn, "c", false, &c, &lc) || !getF32(env, argv[5], fn, "h", false, &h, &lh) ||
      !getI32(env, argv[6], fn, "lengths", &lengths, &ll)) return NULL;
  const int64_t t = s[0], N = s[1], H = s[2];
  if (!need(env, fn, "gates", lg, (t + 1) * N * 4 * H) || !need(env, fn, "c", lc, (t + 2) * N * H) ||
      !need(env, fn, "h", lh, (t + 2) * N * H) || !need(env, fn, "lengths", ll, N)) return NULL;
#ifdef CELLS
  if (hasCells()) { lstmForward(t, N, H, gates, c, h, lengths); return boolValue(env, true); }
#endif
  return boolValue(env, false);
}

/* lstmCellBackward(t, N, H, gates, c, dh, dc, dz, lengths) → done? */
napi_value LstmCellBackward(napi_env env, napi_callback_info info) {
  const char *fn = "lstmCellBackward";
  napi_value argv[9];
  if (!getArgs(env, info, 9, argv, "lstmCellBackward(t, N, H, gates, c, dh, dc, dz, lengths)")) return NULL;
  int64_t s[3];
  float *gates, *c, *dh, *dc, *dz;
  int32_t *lengths;
  size_t lg, lc, lh, ldc, lz, ll;
  if (!getInts(env, argv, 3, fn, SHAPE, s) || !getF32(env, argv[3], fn, "gates", false, &gates, &lg) ||
      !getF32(env, argv[4], fn, "c", false, &c, &lc) || !getF32(env, argv[5], fn, "dh", false, &dh, &lh) ||
      !getF32(env, argv[6], fn, "dc", false, &dc, &ldc) || !getF32(env, argv[7], fn, "dz", false, &dz, &lz) ||
      !getI32(env, argv[8], fn, "lengths", &lengths, &ll)) return NULL;
  const int64_t t = s[0], N = s[1], H = s[2];
  if (!need(env, fn, "gates", lg, (t + 1) * N * 4 * H) || !need(env, fn, "c", lc, (t + 2) * N * H) ||
      !need(env, fn, "dh", lh, (t + 2) * N * H) || !need(env, fn, "dc", ldc, N * H) ||
      !need(env, fn, "dz", lz, (t + 1) * N * 4 * H) || !need(env, fn, "lengths", ll, N)) return NULL;
#ifdef CELLS
  if (hasCells()) { lstmBackward(t, N, H, gates, c, dh, dc, dz, lengths); return boolValue(env, true); }
#endif
  return boolValue(env, false);
}
