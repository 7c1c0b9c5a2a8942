/**
 * The report's series over wall time that come from the devices' steps: throughput and the
 * per-device timeline. Times are on the training clock (segments.ts): a resumed run's segments one
 * after another, each computed on its own, so nothing is averaged across the gap between them.
 */
import type { StepInfo } from './runData.ts';
import type { TrainingClock } from './segments.ts';
import { round } from './numbers.ts';

export interface Throughput {
  /** seconds on the training clock */
  time: number[];
  /** samples per second; null between two segments (a break in the curve: the run was not running) */
  samplesPerSecond: (number | null)[];
}

/** Per device, flat [startSeconds, endSeconds, kind, …] with kind 0 compute, 1 communication, 2 idle. */
export type Timeline = { rank: number; segments: number[] }[];

/** The steps of each segment of the clock, in time order (segments without steps: empty). */
function bySegment(steps: readonly StepInfo[], clock: TrainingClock): StepInfo[][] {
  const out: StepInfo[][] = clock.segments.map(() => []);
  for (const s of steps) out[clock.segmentAt(s.time)]!.push(s);
  for (const list of out) list.sort((a, b) => a.time - b.time);
  return out;
}

/**
 * Samples per second over wall time, all devices together: samples of the steps that ended in a
 * sliding window (1/15 of the training time) before each of `points` instants, shared among the
 * segments by their length. A window spans several steps of every device, so the bursts in which
 * step reports arrive do not show as noise.
 */
export function throughput(steps: readonly StepInfo[], clock: TrainingClock, points: number): Throughput {
  const out: Throughput = { time: [], samplesPerSecond: [] };
  // training starts when the first step started, not when the segment did (data loading, worker start)
  const parts = bySegment(steps, clock)
    .map((sorted, k) => ({ sorted, k }))
    .filter((p) => p.sorted.length > 0)
    .map(({ sorted, k }) => {
      const first = sorted[0]!.time - sorted[0]!.computeMs - sorted[0]!.syncMs;
      return { sorted, k, first, span: Math.max(sorted.at(-1)!.time - first, 1) };
    });
  const total = parts.reduce((n, p) => n + p.span, 0);
  const window = total / 15;
  for (const { sorted, k, first, span } of parts) {
    if (out.time.length > 0) {
      // the resume: the previous segment's curve ends, this one's begins
      out.time.push(round(clock.offsets[k]! / 1000));
      out.samplesPerSecond.push(null);
    }
    const w = Math.min(window, span);
    const n = Math.max(2, Math.round((points * span) / total));
    // prefix sums of samples over the sorted events: samples in (a, b] by two binary searches
    const cum = [0];
    for (const s of sorted) cum.push(cum.at(-1)! + s.samples);
    const upTo = (t: number) => {
      // number of events with time ≤ t
      let lo = 0,
        hi = sorted.length;
      while (lo < hi) {
        const mid = (lo + hi) >> 1;
        if (sorted[mid]!.time <= t) lo = mid + 1;
        else hi = mid;
      }
      return lo;
    };
    for (let i = 0; i < n; i++) {
      const t = first + w + ((span - w) * i) / (n - 1);
      const samples = cum[upTo(t)]! - cum[upTo(t - w)]!;
      out.time.push(round(clock.seconds(t)));
      out.samplesPerSecond.push(round(samples / (w / 1000)));
    }
  }
  return out;
}

/**
 * Where each device spent its time. A step event is stamped when it is received, at the end of the
 * step; its compute, communication and idle time are laid out before that end, in that order, and
 * squeezed (proportionally) where they would overlap the previous step or begin before the segment.
 * Runs with many steps have consecutive steps of a segment merged into one bar per kind, in
 * proportion to the time each took.
 */
export function timeline(
  steps: readonly StepInfo[],
  clock: TrainingClock,
  ranks: number,
  maxSegments: number,
): Timeline {
  const parts = bySegment(steps, clock);
  const out: Timeline = [];
  for (let rank = 0; rank < ranks; rank++) {
    const mine = parts.map((list) => list.filter((s) => s.rank === rank));
    const per = Math.max(1, Math.ceil(mine.reduce((n, l) => n + l.length, 0) / maxSegments));
    const segments: number[] = [];
    mine.forEach((list, k) => {
      let prevEnd = clock.offsets[k]!;
      for (let i = 0; i < list.length; i += per) {
        const group = list.slice(i, i + per);
        const kinds = [0, 0, 0];
        for (const s of group) {
          kinds[0] += s.computeMs;
          kinds[1] += Math.max(0, s.syncMs - s.idleMs);
          kinds[2] += s.idleMs;
        }
        const total = kinds[0]! + kinds[1]! + kinds[2]!;
        const end = clock.ms(group.at(-1)!.time);
        const start = Math.min(end, Math.max(prevEnd, end - total));
        const scale = total > 0 ? (end - start) / total : 0;
        let at = start;
        for (let kind = 0; kind < 3; kind++) {
          const len = kinds[kind]! * scale;
          if (len > 0) segments.push(round(at / 1000, 6), round((at + len) / 1000, 6), kind);
          at += len;
        }
        prevEnd = end;
      }
    });
    out.push({ rank, segments });
  }
  return out;
}
