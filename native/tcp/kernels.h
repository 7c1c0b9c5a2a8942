/*
 * The tcp transport's data kernels in C, shared by the Node-API glue (paratrain_tcp.c) and the
 * native ring (ring.c). Bit-identical to src/comm/tcp/dataPath.ts (wasm) and its JS reference.
 */
#ifndef PARATRAIN_TCP_KERNELS_H
#define PARATRAIN_TCP_KERNELS_H
#include <stddef.h>
#include <stdint.h>

/* the "ptr32" hash's lanes, and the bytes of a stripe (one word per lane) */
#define HASH_LANES 32
#define HASH_STRIPE (HASH_LANES * 4)

/* the lanes before any stripe (xxh32's v1–v4 with seeds 0–7) */
void hash_init(uint32_t lanes[HASH_LANES]);
/* n bytes (a multiple of HASH_STRIPE) at p into lanes */
void hash_stripes(uint32_t *lanes, const uint8_t *p, size_t n);
/* the final hash of a len-byte payload whose whole stripes are in lanes; p = the payload */
uint32_t hash_finish(const uint32_t lanes[HASH_LANES], const uint8_t *p, size_t len);
/* the whole hash of len bytes (a multiple of 4) */
uint32_t hash_payload(const uint8_t *p, size_t len);
/* dst[i] = f32(dst[i] + src[i]) (then / div when div != 0); the result's whole stripes into lanes when given */
void add_hash(float *dst, const float *src, size_t n, float div, uint32_t *lanes);
/* zlib's CRC32 of n bytes */
uint32_t crc32_bytes(const uint8_t *p, size_t n);

#endif
