/** The report's number helpers: rounding for small reports, and the largest value of arrays too long to spread. */

/** `x` to `digits` significant digits (smaller reports; charts need no more). */
export function round(x: number, digits = 5): number {
  return Number.isFinite(x) && x !== 0 ? Number(x.toPrecision(digits)) : x;
}

/** The largest value of several arrays (no spread: runs can have more steps than a call has arguments). */
export function maxOf(...arrays: readonly (readonly number[])[]): number {
  let m = -Infinity;
  for (const a of arrays) for (const x of a) if (x > m) m = x;
  return m;
}
