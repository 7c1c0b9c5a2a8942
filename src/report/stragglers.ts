/**
 * Which devices are stragglers. One rule, used by the live display and by reports.
 *
 * A device is a straggler when its compute time per sample is at least 1.5× the median over all
 * devices. For an even number of devices the median is the lower of the two middle values, so that
 * with two devices the slower one is compared with the faster one (the mean of the two could never be
 * exceeded 1.5× by a device only twice as slow). Compute time, not wall time: a device that waits
 * for a slow peer is idle, not slow. With a single device there is nothing to compare: no stragglers.
 */
export const STRAGGLER_RATIO = 1.5;

/** `perSampleMs[i]`: compute milliseconds per sample of device i (NaN or ≤ 0: no data yet). */
export function findStragglers(perSampleMs: readonly number[]): boolean[] {
  const known = perSampleMs.filter((x) => Number.isFinite(x) && x > 0).sort((a, b) => a - b);
  if (known.length < 2) return perSampleMs.map(() => false);
  const median = known[Math.floor((known.length - 1) / 2)]!;
  return perSampleMs.map((x) => Number.isFinite(x) && x >= STRAGGLER_RATIO * median);
}
