/*
 * The data kernels of the tcp transport's native path (see kernels.h): the "ptr32" payload hash
 * (lane j of 32 takes word j of every 128-byte stripe: acc = rotl(acc + w·P2, 13)·P1, four
 * independent 8-lane chains so that the multiplies overlap; then the lanes
 * and tail words are folded and avalanched as in src/comm/tcp/dataPath.ts), the fused reduce step
 * and zlib's CRC32 for frame headers.
 *
 * Results are bit-identical to the wasm kernel: float32 add and divide are exact IEEE operations
 * and nothing is reassociated (no -ffast-math), so ranks with and without this addon interoperate.
 * x86-64 gets an AVX2 clone chosen at load time (target_clones); elsewhere GCC's generic vectors.
 */
#include <string.h>
#include "kernels.h"

#define P1 2654435761u
#define P2 2246822519u

typedef uint32_t u32x8 __attribute__((vector_size(32)));
typedef float f32x8 __attribute__((vector_size(32)));

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define CLONES __attribute__((target_clones("avx2", "default")))
#else
#define CLONES
#endif

static inline __attribute__((always_inline)) u32x8 round8(u32x8 acc, u32x8 w) {
  u32x8 t = acc + w * P2;
  return ((t << 13) | (t >> 19)) * P1;
}

/* n bytes (a multiple of HASH_STRIPE) at p into lanes[HASH_LANES]. */
CLONES void hash_stripes(uint32_t *lanes, const uint8_t *p, size_t n) {
  u32x8 a, b, c, d, w;
  memcpy(&a, lanes, 32);
  memcpy(&b, lanes + 8, 32);
  memcpy(&c, lanes + 16, 32);
  memcpy(&d, lanes + 24, 32);
  for (const uint8_t *end = p + n; p < end; p += HASH_STRIPE) {
    memcpy(&w, p, 32);
    a = round8(a, w);
    memcpy(&w, p + 32, 32);
    b = round8(b, w);
    memcpy(&w, p + 64, 32);
    c = round8(c, w);
    memcpy(&w, p + 96, 32);
    d = round8(d, w);
  }
  memcpy(lanes, &a, 32);
  memcpy(lanes + 8, &b, 32);
  memcpy(lanes + 16, &c, 32);
  memcpy(lanes + 24, &d, 32);
}

/* 8 floats: dst = dst + src (/ div when div != 0); returns the result's bits for the hash */
static inline __attribute__((always_inline)) u32x8 add8(float *dst, const float *src, float div, f32x8 dv) {
  f32x8 x, y;
  memcpy(&x, dst, 32);
  memcpy(&y, src, 32);
  x += y;
  if (div != 0.0f) x /= dv;
  memcpy(dst, &x, 32);
  u32x8 w;
  memcpy(&w, &x, 32);
  return w;
}

/* dst[i] = f32(dst[i] + src[i]) (/ div when div != 0) for n floats; the whole stripes of the result into lanes when given. */
CLONES void add_hash(float *dst, const float *src, size_t n, float div, uint32_t *lanes) {
  const f32x8 dv = {div, div, div, div, div, div, div, div};
  size_t i = 0;
  if (lanes) {
    u32x8 a, b, c, d;
    memcpy(&a, lanes, 32);
    memcpy(&b, lanes + 8, 32);
    memcpy(&c, lanes + 16, 32);
    memcpy(&d, lanes + 24, 32);
    for (; i + HASH_LANES <= n; i += HASH_LANES) {
      a = round8(a, add8(dst + i, src + i, div, dv));
      b = round8(b, add8(dst + i + 8, src + i + 8, div, dv));
      c = round8(c, add8(dst + i + 16, src + i + 16, div, dv));
      d = round8(d, add8(dst + i + 24, src + i + 24, div, dv));
    }
    memcpy(lanes, &a, 32);
    memcpy(lanes + 8, &b, 32);
    memcpy(lanes + 16, &c, 32);
    memcpy(lanes + 24, &d, 32);
  } else {
    for (; i + 8 <= n; i += 8) add8(dst + i, src + i, div, dv);
  }
  for (; i < n; i++) {
    float s = dst[i] + src[i];
    dst[i] = div != 0.0f ? s / div : s;
  }
}

#define P3 3266489917u
#define P4 668265263u
#define P5 374761393u

static inline uint32_t rotl32(uint32_t x, int r) { return (x << r) | (x >> (32 - r)); }

void hash_init(uint32_t lanes[HASH_LANES]) {
  for (uint32_t a = 0; a < HASH_LANES / 4; a++) {
    lanes[a * 4] = P1 + P2 + a;
    lanes[a * 4 + 1] = P2 + a;
    lanes[a * 4 + 2] = a;
    lanes[a * 4 + 3] = a - P1;
  }
}

static inline uint32_t fold(uint32_t h, uint32_t x) { return rotl32(h + x * P3, 17) * P4; }

uint32_t hash_finish(const uint32_t lanes[HASH_LANES], const uint8_t *p, size_t len) {
  uint32_t h = (uint32_t)len + P5;
  for (int i = 0; i < HASH_LANES; i++) h = fold(h, lanes[i]);
  for (size_t at = len - len % HASH_STRIPE; at + 4 <= len; at += 4) {
    uint32_t w;
    memcpy(&w, p + at, 4);
    h = fold(h, w);
  }
  h ^= h >> 15;
  h *= P2;
  h ^= h >> 13;
  h *= P3;
  h ^= h >> 16;
  return h;
}

uint32_t hash_payload(const uint8_t *p, size_t len) {
  uint32_t lanes[HASH_LANES];
  hash_init(lanes);
  hash_stripes(lanes, p, len - len % HASH_STRIPE);
  return hash_finish(lanes, p, len);
}

static uint32_t crc_table[256];

/* filled once at load, before any thread can call crc32_bytes */
__attribute__((constructor)) static void crc_table_init(void) {
  for (uint32_t i = 0; i < 256; i++) {
    uint32_t c = i;
    for (int k = 0; k < 8; k++) c = c & 1 ? 0xEDB88320u ^ (c >> 1) : c >> 1;
    crc_table[i] = c;
  }
}

uint32_t crc32_bytes(const uint8_t *p, size_t n) {
  uint32_t c = 0xFFFFFFFFu;
  for (size_t i = 0; i < n; i++) c = crc_table[(c ^ p[i]) & 0xFF] ^ (c >> 8);
  return c ^ 0xFFFFFFFFu;
}
