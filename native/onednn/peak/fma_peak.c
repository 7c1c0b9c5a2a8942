/*
 * paratrain_peak: the machine's single-core floating-point peak, measured, so benchmark figures can
 * be printed as a fraction of it (bench/peak.ts). An FMA micro-benchmark: 12 independent
 * accumulators (enough to cover an FMA unit's latency × its pipes on current x86 cores — 4 × 2 —
 * and few enough, with the two constants, for the 16 vector registers of AVX2) each run
 * acc = acc·m + c in a loop for about the requested time, with the vectors of one width:
 * 512-bit (AVX-512F), 256-bit (AVX2 + FMA) or 128-bit (FMA on xmm registers; SSE multiply + add
 * where there is no FMA). Each width's code is compiled for its ISA with a target attribute and
 * only called when the CPU has it, so the addon itself needs no -march and runs anywhere.
 * The loop is timed in chunks of BLOCK iterations (tens of microseconds) and the fastest chunk
 * counts: a peak is a maximum, and on a shared machine (another process on the core or its SMT
 * sibling) the average over the whole run would understate it. The average is returned beside it
 * (`sustainedGflops`): run on every core at once (bench/peak.ts coreScaling) it says how much of
 * G cores' peak the host gives when all of them compute, the ceiling of any G-device job.
 */
#include <stdbool.h>
#include <stdint.h>
#include <time.h>
#include <node_api.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define X86 1
#endif

#define ACC 12
#define BLOCK 4096

static double seconds(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/*
 * Runs chunks of BLOCK iterations of 12 independent multiply-adds for `duration` seconds; returns
 * the fastest chunk's flops per second and stores the whole run's in `*sustained`. The accumulators are 12 named variables (not an array) so that -O2 keeps them
 * in registers: the loop body is 12 FMA instructions and a counter.
 */
#define MEASURE(VEC, SET1, FMA, STORE, LANES)                                               \
  VEC a0 = SET1(1.0f + 0.0f * 0.01f), a1 = SET1(1.0f + 1.0f * 0.01f), a2 = SET1(1.0f + 2.0f * 0.01f), a3 = SET1(1.0f + 3.0f * 0.01f), a4 = SET1(1.0f + 4.0f * 0.01f), a5 = SET1(1.0f + 5.0f * 0.01f), a6 = SET1(1.0f + 6.0f * 0.01f), a7 = SET1(1.0f + 7.0f * 0.01f), a8 = SET1(1.0f + 8.0f * 0.01f), a9 = SET1(1.0f + 9.0f * 0.01f), a10 = SET1(1.0f + 10.0f * 0.01f), a11 = SET1(1.0f + 11.0f * 0.01f); \
  const VEC m = SET1(0.9999999f), c = SET1(1e-7f);                                          \
  const double start = seconds();                                                           \
  double t = start, best = 0;                                                               \
  long chunks = 0;                                                                          \
  do {                                                                                      \
    const double t0 = t;                                                                    \
    for (int k = 0; k < BLOCK; k++) {                                                       \
      a0 = FMA(a0, m, c); a1 = FMA(a1, m, c); a2 = FMA(a2, m, c); a3 = FMA(a3, m, c); a4 = FMA(a4, m, c); a5 = FMA(a5, m, c); a6 = FMA(a6, m, c); a7 = FMA(a7, m, c); a8 = FMA(a8, m, c); a9 = FMA(a9, m, c); a10 = FMA(a10, m, c); a11 = FMA(a11, m, c); \
    }                                                                                       \
    t = seconds();                                                                          \
    if (t > t0 && 1.0 / (t - t0) > best) best = 1.0 / (t - t0);                             \
    chunks++;                                                                               \
  } while (t - start < duration);                                                           \
  float sink[LANES];                                                                        \
  VEC s = a0;                                                                               \
  s = FMA(s, m, a1); s = FMA(s, m, a2); s = FMA(s, m, a3); s = FMA(s, m, a4); s = FMA(s, m, a5); s = FMA(s, m, a6); s = FMA(s, m, a7); s = FMA(s, m, a8); s = FMA(s, m, a9); s = FMA(s, m, a10); s = FMA(s, m, a11); \
  STORE(sink, s);                                                                           \
  *check = sink[0];                                                                         \
  *sustained = (double)chunks / (t - start) * BLOCK * ACC * LANES * 2;                      \
  return best * BLOCK * ACC * LANES * 2;

#ifdef X86
__attribute__((target("avx512f"))) static double peak512(double duration, float *check, double *sustained) {
  MEASURE(__m512, _mm512_set1_ps, _mm512_fmadd_ps, _mm512_storeu_ps, 16)
}

__attribute__((target("avx2,fma"))) static double peak256(double duration, float *check, double *sustained) {
  MEASURE(__m256, _mm256_set1_ps, _mm256_fmadd_ps, _mm256_storeu_ps, 8)
}

__attribute__((target("fma"))) static double peak128fma(double duration, float *check, double *sustained) {
  MEASURE(__m128, _mm_set1_ps, _mm_fmadd_ps, _mm_storeu_ps, 4)
}

static inline __m128 mulAdd(__m128 a, __m128 b, __m128 c) { return _mm_add_ps(_mm_mul_ps(a, b), c); }
static double peak128sse(double duration, float *check, double *sustained) {
  MEASURE(__m128, _mm_set1_ps, mulAdd, _mm_storeu_ps, 4)
}
#endif

typedef struct { float v[4]; } F4;
static inline F4 set4(float x) { return (F4){ { x, x, x, x } }; }
static inline F4 fma4(F4 a, F4 b, F4 c) { F4 r; for (int i = 0; i < 4; i++) r.v[i] = a.v[i] * b.v[i] + c.v[i]; return r; }
static inline void store4(float *p, F4 a) { for (int i = 0; i < 4; i++) p[i] = a.v[i]; }
/* Portable 4-lane fallback (other architectures): what the compiler makes of plain C. */
static double peakGeneric(double duration, float *check, double *sustained) {
  MEASURE(F4, set4, fma4, store4, 4)
}

/* The widest vector width this CPU runs FMAs on, in bits. */
static int widest(void) {
#ifdef X86
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) return 512;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return 256;
#endif
  return 128;
}

static bool hasFma128(void) {
#ifdef X86
  __builtin_cpu_init();
  return __builtin_cpu_supports("fma");
#else
  return false;
#endif
}

/*
 * fmaPeak(bits, seconds) → { bits, gflops, sustainedGflops, fma }: bits 0 means the widest this CPU
 * has; gflops is the fastest chunk's rate, sustainedGflops the whole run's.
 */
static napi_value FmaPeak(napi_env env, napi_callback_info info) {
  size_t argc = 2;
  napi_value argv[2], out, v;
  double bits = 0, duration = 0.2;
  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  if (argc >= 1) napi_get_value_double(env, argv[0], &bits);
  if (argc >= 2) napi_get_value_double(env, argv[1], &duration);
  if (!(duration > 0 && duration <= 10)) duration = 0.2;
  int want = bits == 0 ? widest() : (int)bits;
  if (want != 128 && want != 256 && want != 512) { napi_throw_range_error(env, NULL, "fmaPeak: bits must be 0, 128, 256 or 512"); return NULL; }
  if (want > widest()) { napi_throw_range_error(env, NULL, "fmaPeak: this CPU has no FMA of that width"); return NULL; }
  float check = 0;
  double flops, sustained = 0;
  bool fma = true;
#ifdef X86
  if (want == 512) flops = peak512(duration, &check, &sustained);
  else if (want == 256) flops = peak256(duration, &check, &sustained);
  else if (hasFma128()) flops = peak128fma(duration, &check, &sustained);
  else { fma = false; flops = peak128sse(duration, &check, &sustained); }
#else
  fma = false;
  flops = peakGeneric(duration, &check, &sustained);
#endif
  (void)peakGeneric;
  napi_create_object(env, &out);
  napi_create_int32(env, want, &v); napi_set_named_property(env, out, "bits", v);
  napi_create_double(env, flops / 1e9, &v); napi_set_named_property(env, out, "gflops", v);
  napi_create_double(env, sustained / 1e9, &v); napi_set_named_property(env, out, "sustainedGflops", v);
  napi_get_boolean(env, fma, &v); napi_set_named_property(env, out, "fma", v);
  napi_create_double(env, check, &v); napi_set_named_property(env, out, "check", v);
  return out;
}

NAPI_MODULE_INIT(/* napi_env env, napi_value exports */) {
  napi_value fn;
  if (napi_create_function(env, "fmaPeak", NAPI_AUTO_LENGTH, FmaPeak, NULL, &fn) != napi_ok ||
      napi_set_named_property(env, exports, "fmaPeak", fn) != napi_ok) return NULL;
  return exports;
}
