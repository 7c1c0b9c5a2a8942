/*
 * paratrain_tcp: the optional native data path of the tcp transport (Node-API, plain C, no library).
 *
 * The same operations as src/comm/tcp/dataPath.wat, but on any memory (kernels.c): wasm can only
 * touch its own linear memory, so the wasm path copies the caller's floats in and out; here they
 * are read and written where they are. And the native ring (ring.c), which runs a ring
 * collective's frames on the sockets themselves.
 *
 *   hash(lanes, data)          feeds the whole 128-byte stripes of `data` into the 32 u32 lanes of
 *                              the "ptr32" payload hash; the tail and the final mix stay in JS
 *   addHash(dst, src, div, lanes|null)
 *                              dst[i] = f32(dst[i] + src[i]), then f32(· / div) when div != 0, and
 *                              (lanes given) the result's whole stripes fed into lanes: the reduce
 *                              step and the checksum of the frame it forwards, in one pass
 *   ring(...)                  see js_ring below and ring.h
 *
 * Every array may be a view at any byteOffset; lengths are checked before memory is touched.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <node_api.h>
#include "kernels.h"
#include "ring.h"

/* ------------------------------------------------------------------ Node-API glue */

static napi_value throw_range(napi_env env, const char *msg) {
  napi_throw_range_error(env, NULL, msg);
  return NULL;
}

/* A typed array's data pointer (already advanced by its byteOffset) and byte length; NULL after throwing. */
static void *bytes_of(napi_env env, napi_value v, size_t *bytes, const char *what) {
  bool is = false;
  napi_is_typedarray(env, v, &is);
  if (!is) {
    char msg[96];
    snprintf(msg, sizeof msg, "paratrain_tcp: %s must be a typed array", what);
    napi_throw_type_error(env, NULL, msg);
    return NULL;
  }
  napi_typedarray_type type;
  size_t length;
  void *data;
  napi_value ab;
  size_t offset;
  if (napi_get_typedarray_info(env, v, &type, &length, &data, &ab, &offset) != napi_ok) {
    napi_throw_error(env, NULL, "paratrain_tcp: cannot read a typed array");
    return NULL;
  }
  size_t elem = 1;
  switch (type) {
    case napi_int16_array: case napi_uint16_array: elem = 2; break;
    case napi_int32_array: case napi_uint32_array: case napi_float32_array: elem = 4; break;
    case napi_float64_array: case napi_bigint64_array: case napi_biguint64_array: elem = 8; break;
    default: elem = 1;
  }
  *bytes = length * elem;
  /* a zero-length view may carry a NULL pointer; any non-NULL address does for it */
  return data ? data : (void *)bytes;
}

static uint32_t *lanes_of(napi_env env, napi_value v) {
  size_t bytes;
  uint32_t *lanes = bytes_of(env, v, &bytes, "lanes");
  if (!lanes) return NULL;
  if (bytes != HASH_LANES * 4) {
    throw_range(env, "paratrain_tcp: lanes must be 32 uint32 (128 bytes)");
    return NULL;
  }
  return lanes;
}

/* The first n arguments into argv; false (after throwing `usage`) when fewer were passed. */
static bool get_args(napi_env env, napi_callback_info info, size_t n, napi_value *argv, const char *usage) {
  size_t argc = n;
  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  if (argc >= n) return true;
  throw_range(env, usage);
  return false;
}

/* hash(lanes: Uint32Array(32), data: TypedArray): void */
static napi_value js_hash(napi_env env, napi_callback_info info) {
  napi_value argv[2];
  if (!get_args(env, info, 2, argv, "paratrain_tcp: hash(lanes, data)")) return NULL;
  uint32_t *lanes = lanes_of(env, argv[0]);
  if (!lanes) return NULL;
  size_t n;
  const uint8_t *p = bytes_of(env, argv[1], &n, "data");
  if (!p) return NULL;
  hash_stripes(lanes, p, n - n % HASH_STRIPE);
  return NULL;
}

/* addHash(dst: Float32Array, src: TypedArray, div: number, lanes: Uint32Array | null): void */
static napi_value js_add_hash(napi_env env, napi_callback_info info) {
  napi_value argv[4];
  if (!get_args(env, info, 4, argv, "paratrain_tcp: addHash(dst, src, div, lanes)")) return NULL;
  size_t dn, sn;
  float *dst = bytes_of(env, argv[0], &dn, "dst");
  if (!dst) return NULL;
  const float *src = bytes_of(env, argv[1], &sn, "src");
  if (!src) return NULL;
  if (dn % 4 != 0 || sn < dn) return throw_range(env, "paratrain_tcp: addHash needs whole floats and src at least as long as dst");
  if (((uintptr_t)dst | (uintptr_t)src) % 4 != 0) return throw_range(env, "paratrain_tcp: addHash needs 4-byte aligned arrays");
  double div;
  if (napi_get_value_double(env, argv[2], &div) != napi_ok) return throw_range(env, "paratrain_tcp: div must be a number");
  napi_valuetype lt;
  napi_typeof(env, argv[3], &lt);
  uint32_t *lanes = NULL;
  if (lt != napi_null && lt != napi_undefined) {
    lanes = lanes_of(env, argv[3]);
    if (!lanes) return NULL;
  }
  add_hash(dst, src, dn / 4, (float)div, lanes);
  return NULL;
}

/*
 * ring(inFd, outFd, buf: Float32Array, slot: Uint8Array, steps: Float64Array, io: Float64Array,
 *      head: Uint8Array(32)[, watch: Int32Array]): string | undefined — runs ring_run (ring.h)
 * synchronously; `watch`: socket descriptors that hand the ring back once readable (io then holds
 * 25 numbers and head 64 bytes: [22] partial_off, [23] partial_payload, [24] partial_len, and
 * head[32..64) out_head, for status RING_ABORTED).
 * steps: 5 numbers a step (start, end, reduce, forward, div). io in: [0] sendStart, [1] sendEnd,
 * [2] type, [3] flags, [4] arg, [5] tag, [6] aux, [7] chunkFloats, [8] maxFrame, [9] sliceMs,
 * [10] timeoutMs, [11] inSeq, [12] outSeq, [13] step, [14] cur, [18] header bytes already read into
 * `head` (0 or 32: the next frame's, sequence inSeq); out: [11]–[14] updated, [15] status,
 * [16] error kind, [17] errno, [18] header bytes in `head`, [19] ms until the first frame,
 * [20] bytes in, [21] bytes out. Returns the error message when status is RING_ERROR.
 */
static napi_value js_ring(napi_env env, napi_callback_info info) {
  napi_value argv[8];
  size_t argc = 8;
  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  if (argc < 7) return throw_range(env, "paratrain_tcp: ring(inFd, outFd, buf, slot, steps, io, head[, watch])");
  const int32_t *watch = NULL;
  size_t watch_bytes = 0;
  if (argc >= 8) {
    napi_valuetype wt;
    napi_typeof(env, argv[7], &wt);
    if (wt != napi_undefined && wt != napi_null) {
      watch = bytes_of(env, argv[7], &watch_bytes, "watch");
      if (!watch) return NULL;
      if (watch_bytes % 4 != 0 || (uintptr_t)watch % 4 != 0) return throw_range(env, "paratrain_tcp: ring: watch must be an Int32Array of socket descriptors");
    }
  }
  int32_t in_fd, out_fd;
  if (napi_get_value_int32(env, argv[0], &in_fd) != napi_ok || napi_get_value_int32(env, argv[1], &out_fd) != napi_ok || in_fd < 0 || out_fd < 0) {
    return throw_range(env, "paratrain_tcp: ring needs two socket descriptors");
  }
  size_t buf_bytes, slot_bytes, step_bytes, io_bytes, head_bytes;
  float *buf = bytes_of(env, argv[2], &buf_bytes, "buf");
  if (!buf) return NULL;
  uint8_t *slot = bytes_of(env, argv[3], &slot_bytes, "slot");
  if (!slot) return NULL;
  double *st = bytes_of(env, argv[4], &step_bytes, "steps");
  if (!st) return NULL;
  double *io = bytes_of(env, argv[5], &io_bytes, "io");
  if (!io) return NULL;
  uint8_t *head = bytes_of(env, argv[6], &head_bytes, "head");
  if (!head) return NULL;
  if (io_bytes < 22 * 8 || head_bytes < 32 || step_bytes % 40 != 0 || ((uintptr_t)buf | (uintptr_t)slot) % 4 != 0) {
    return throw_range(env, "paratrain_tcp: ring: io needs 22 numbers, head 32 bytes, steps 5 numbers each, buf and slot 4-byte alignment");
  }
  if (watch && (io_bytes < 25 * 8 || head_bytes < 64)) {
    return throw_range(env, "paratrain_tcp: ring: with watch, io needs 25 numbers and head 64 bytes");
  }
  size_t nsteps = step_bytes / 40, floats = buf_bytes / 4;
  ring_step *steps = malloc((nsteps ? nsteps : 1) * sizeof *steps);
  if (!steps) return throw_range(env, "paratrain_tcp: out of memory");
  for (size_t i = 0; i < nsteps; i++) {
    const double *d = st + i * 5;
    steps[i] = (ring_step){(uint64_t)d[0], (uint64_t)d[1], d[2] != 0, d[3] != 0, (float)d[4]};
    if (!(d[0] >= 0 && d[0] <= d[1] && d[1] <= (double)floats)) {
      free(steps);
      return throw_range(env, "paratrain_tcp: ring: a step lies outside the buffer");
    }
  }
  ring_args a = {
    .in_fd = in_fd, .out_fd = out_fd, .buf = buf, .slot = slot, .slot_bytes = slot_bytes, .steps = steps, .nsteps = nsteps,
    .send_start = (uint64_t)io[0], .send_end = (uint64_t)io[1], .type = (uint32_t)io[2], .flags = (uint32_t)io[3],
    .arg = (uint32_t)io[4], .tag = (uint32_t)io[5], .aux = (uint32_t)io[6], .chunk_floats = (uint32_t)io[7],
    .max_frame = (uint32_t)io[8], .slice_ms = (int)io[9], .timeout_ms = (int)io[10], .in_seq = (uint32_t)io[11],
    .out_seq = (uint32_t)io[12], .step = (size_t)io[13], .cur = (uint64_t)io[14], .head_fill = (int)io[18],
    .watch_fds = watch, .nwatch = (int)(watch_bytes / 4),
  };
  memcpy(a.head, head, 32);
  if (a.send_start > a.send_end || a.send_end > floats || a.chunk_floats == 0 || a.step > nsteps || (a.head_fill != 0 && a.head_fill != 32) ||
      (a.step < nsteps && (a.cur < steps[a.step].start || a.cur > steps[a.step].end))) {
    free(steps);
    return throw_range(env, "paratrain_tcp: ring: bad send range, chunk, step, position in it or header fill");
  }
  ring_run(&a);
  free(steps);
  io[11] = a.in_seq;
  io[12] = a.out_seq;
  io[13] = (double)a.step;
  io[14] = (double)a.cur;
  io[15] = a.status;
  io[16] = a.err_kind;
  io[17] = a.err_no;
  io[18] = a.head_fill;
  io[19] = a.wait_ms;
  io[20] = (double)a.bytes_in;
  io[21] = (double)a.bytes_out;
  memcpy(head, a.head, 32);
  if (watch) {
    io[22] = (double)a.partial_off;
    io[23] = (double)a.partial_payload;
    io[24] = (double)a.partial_len;
    memcpy(head + 32, a.out_head, 32);
  }
  if (a.status != RING_ERROR) return NULL;
  napi_value msg;
  napi_create_string_utf8(env, a.msg, NAPI_AUTO_LENGTH, &msg);
  return msg;
}

static napi_value init(napi_env env, napi_value exports) {
  napi_property_descriptor props[] = {
    { "hash", NULL, js_hash, NULL, NULL, NULL, napi_default, NULL },
    { "addHash", NULL, js_add_hash, NULL, NULL, NULL, napi_default, NULL },
    { "ring", NULL, js_ring, NULL, NULL, NULL, napi_default, NULL },
  };
  napi_define_properties(env, exports, sizeof props / sizeof props[0], props);
  return exports;
}

NAPI_MODULE(NODE_GYP_MODULE_NAME, init)
