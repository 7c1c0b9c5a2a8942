/*
 * Backend.copyRows in C (src/kernels/js/rows.ts is the definition): the attention layer splits its
 * q | k | v rows into heads and joins them back with it, four calls a pass of one short row (headDim
 * floats) per (sample, head, frame). A memcpy a row, called from JS directly, moves the split of
 * bench/attention.ts's two shapes at 23–36 GB/s on a Zen 4, the wasm kernel (through its JS
 * wrapper) at 14–25. Every row is bounds-checked before any is written.
 */
#include <string.h>
#include "onednn.h"

/* copyRows(from, fromStarts, to, toStarts, count, width, add) → true (throws RangeError on a row out of bounds) */
napi_value CopyRows(napi_env env, napi_callback_info info) {
  static const char *const fn = "copyRows";
  napi_value argv[7];
  if (!getArgs(env, info, 7, argv, "copyRows(from, fromStarts, to, toStarts, count, width, add)")) return NULL;
  float *from, *to;
  int32_t *fs, *ts;
  size_t lf, lfs, lt, lts;
  static const char *const names[] = { "count", "width" };
  int64_t s[2];
  bool add;
  if (!getF32(env, argv[0], fn, "from", false, &from, &lf) || !getI32(env, argv[1], fn, "fromStarts", &fs, &lfs) ||
      !getF32(env, argv[2], fn, "to", false, &to, &lt) || !getI32(env, argv[3], fn, "toStarts", &ts, &lts) ||
      !getInts(env, argv + 4, 2, fn, names, s))
    return NULL;
  if (napi_get_value_bool(env, argv[6], &add) != napi_ok) {
    napi_throw_type_error(env, NULL, "copyRows: add must be a boolean");
    return NULL;
  }
  const int64_t count = s[0], width = s[1];
  if (!need(env, fn, "fromStarts", lfs, count) || !need(env, fn, "toStarts", lts, count)) return NULL;
  const int64_t fromEnd = (int64_t)lf - width, toEnd = (int64_t)lt - width;
  for (int64_t i = 0; i < count; i++) {
    if (fs[i] < -1 || fs[i] > fromEnd || ts[i] < 0 || ts[i] > toEnd) {
      char msg[160];
      snprintf(msg, sizeof msg, "%s: row %lld reads from[%d …) of %zu values or writes to[%d …) of %zu, %lld wide", fn,
               (long long)i, fs[i], lf, ts[i], lt, (long long)width);
      napi_throw_range_error(env, NULL, msg);
      return NULL;
    }
  }
  const size_t bytes = (size_t)width * sizeof(float);
  for (int64_t i = 0; i < count; i++) {
    float *t = to + ts[i];
    if (fs[i] < 0) {
      if (!add) memset(t, 0, bytes);
    } else if (!add) memcpy(t, from + fs[i], bytes);
    else {
      const float *f = from + fs[i];
      for (int64_t j = 0; j < width; j++) t[j] += f[j];
    }
  }
  return boolValue(env, true);
}
