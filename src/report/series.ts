/** The series the HTML report draws from a run's events, downsampled so a report stays small whatever its length. */
import type { RunData, StepInfo } from './runData.ts';
import { maxOf, round } from './numbers.ts';

/** At most this many points per run in a step series (loss, accuracy). */
export const MAX_SERIES_POINTS = 2000;
/** At most this many bars per device in the timeline (consecutive steps are merged beyond). */
export const MAX_TIMELINE_SEGMENTS = 300;
/** Points in the throughput curve. */
export const THROUGHPUT_POINTS = 60;
/** Staleness values at or above this share the last histogram bar. */
export const STALENESS_BINS = 64;

export interface StepSeries {
  /** global step (mean of the merged steps when downsampled) */
  step: number[];
  /** seconds since the run started */
  time: number[];
  /** training loss over the step's samples, all devices (null: not a number) */
  loss: (number | null)[];
  accuracy: (number | null)[];
  /** how many steps each point stands for (1 unless downsampled) */
  merged: number;
}

export interface RunSeries {
  steps: StepSeries;
  /** evaluations of the test set; cer/wer (valCer/valWer): a speech model's error rates, NaN when not recorded */
  evals: {
    step: number;
    time: number;
    accuracy: number;
    loss: number;
    cer: number;
    wer: number;
    valCer: number;
    valWer: number;
  }[];
  /** evaluations of the validation split (empty: none) */
  validation: { step: number; time: number; epoch: number; accuracy: number; loss: number }[];
  /** the learning rate of each step (downsampled like the steps; empty when the events do not record it) */
  lr: { step: number[]; lr: number[] };
  /** stall reports: seconds since the start, the waiting device, how long it had waited, in what, for whom */
  stalls: { time: number; rank: number; seconds: number; waitingIn: string; missing: number[] }[];
  throughput: { time: number[]; samplesPerSecond: number[] };
  /** per device, flat [startSeconds, endSeconds, kind, …] with kind 0 compute, 1 communication, 2 idle */
  timeline: { rank: number; segments: number[] }[];
  /** counts[v]: applied gradients of staleness v (the last bin: ≥ STALENESS_BINS − 1); null when not recorded */
  staleness: { counts: number[]; dropped: number } | null;
}

export function series(run: RunData): RunSeries {
  const t0 = run.start.time;
  return {
    steps: stepSeries(run.steps, t0, MAX_SERIES_POINTS),
    evals: run.evals
      .filter((e) => Number.isFinite(e.testLoss) || Number.isFinite(e.testAccuracy) || e.valCER !== undefined)
      .map((e) => ({
        step: e.step,
        time: (e.time - t0) / 1000,
        accuracy: e.testAccuracy,
        loss: e.testLoss,
        cer: e.testCER ?? NaN,
        wer: e.testWER ?? NaN,
        valCer: e.valCER ?? NaN,
        valWer: e.valWER ?? NaN,
      })),
    validation: run.evals
      .filter((e) => Number.isFinite(e.valLoss) || Number.isFinite(e.valAccuracy))
      .map((e) => ({
        step: e.step,
        time: (e.time - t0) / 1000,
        epoch: e.epoch,
        accuracy: e.valAccuracy,
        loss: e.valLoss,
      })),
    lr: lrSeries(run.steps, MAX_SERIES_POINTS),
    stalls: run.stalls.map((x) => ({
      time: round((x.time - t0) / 1000),
      rank: x.rank,
      seconds: round(x.seconds, 3),
      waitingIn: x.waitingIn,
      missing: x.missing,
    })),
    throughput: throughput(run.steps, t0, THROUGHPUT_POINTS),
    timeline: timeline(
      run.steps,
      t0,
      maxOf(
        [run.start.devices / run.start.processes],
        run.steps.map((s) => s.rank + 1),
      ),
      MAX_TIMELINE_SEGMENTS,
    ),
    staleness: stalenessHistogram(run.steps),
  };
}

/** Steps of all devices with the same global step number are combined (sample-weighted), then downsampled. */
export function stepSeries(steps: readonly StepInfo[], t0: number, maxPoints: number): StepSeries {
  const byStep = new Map<number, { w: number; loss: number; lossW: number; acc: number; accW: number; time: number }>();
  for (const s of steps) {
    const a = byStep.get(s.step) ?? { w: 0, loss: 0, lossW: 0, acc: 0, accW: 0, time: 0 };
    const w = s.samples > 0 ? s.samples : 1;
    if (Number.isFinite(s.loss)) {
      a.loss += w * s.loss;
      a.lossW += w;
    }
    if (Number.isFinite(s.accuracy)) {
      a.acc += w * s.accuracy;
      a.accW += w;
    }
    a.time = Math.max(a.time, s.time); // the step is done when its last device reports it
    byStep.set(s.step, a);
  }
  const keys = [...byStep.keys()].sort((a, b) => a - b);
  const step = keys;
  const time = keys.map((k) => (byStep.get(k)!.time - t0) / 1000);
  const loss = keys.map((k) => {
    const a = byStep.get(k)!;
    return a.lossW > 0 ? a.loss / a.lossW : NaN;
  });
  const accuracy = keys.map((k) => {
    const a = byStep.get(k)!;
    return a.accW > 0 ? a.acc / a.accW : NaN;
  });
  const [dStep, dTime, dLoss, dAcc] = downsample([step, time, loss, accuracy], maxPoints);
  return {
    step: dStep!,
    time: dTime!,
    loss: dLoss!.map((x) => (Number.isFinite(x) ? x : null)),
    accuracy: dAcc!.map((x) => (Number.isFinite(x) ? x : null)),
    merged: Math.ceil(keys.length / Math.max(1, Math.min(maxPoints, keys.length))),
  };
}

/** The learning rate per global step (the first device to report a step gives it: every device uses the same), downsampled. */
function lrSeries(steps: readonly StepInfo[], maxPoints: number): RunSeries['lr'] {
  const byStep = new Map<number, number>();
  for (const s of steps) if (s.lr !== undefined && !byStep.has(s.step)) byStep.set(s.step, s.lr);
  const keys = [...byStep.keys()].sort((a, b) => a - b);
  const [step, lr] = downsample([keys, keys.map((k) => byStep.get(k)!)], maxPoints);
  return { step: step!, lr: lr!.map((x) => round(x, 6)) };
}

/**
 * Merges consecutive points of parallel arrays into at most `maxPoints` buckets of equal size,
 * each the mean of its finite values (NaN when it has none). Means, not picks: a noisy loss
 * curve keeps its trend instead of a random sample of its noise.
 */
export function downsample(columns: readonly (readonly number[])[], maxPoints: number): number[][] {
  const n = columns[0]?.length ?? 0;
  if (n <= maxPoints) return columns.map((c) => [...c]);
  const size = Math.ceil(n / maxPoints);
  return columns.map((c) => {
    const out: number[] = [];
    for (let i = 0; i < n; i += size) {
      let sum = 0,
        k = 0;
      for (let j = i; j < Math.min(n, i + size); j++)
        if (Number.isFinite(c[j]!)) {
          sum += c[j]!;
          k++;
        }
      out.push(k > 0 ? sum / k : NaN);
    }
    return out;
  });
}

/**
 * Samples per second over wall time, all devices together: samples of the steps that ended in a
 * sliding window (1/15 of the training time) before each of `points` instants. A window spans
 * several steps of every device, so the bursts in which step reports arrive do not show as noise.
 */
function throughput(steps: readonly StepInfo[], t0: number, points: number): RunSeries['throughput'] {
  const sorted = [...steps].sort((a, b) => a.time - b.time);
  const out = { time: [] as number[], samplesPerSecond: [] as number[] };
  if (sorted.length === 0) return out;
  // training starts when the first step started, not when the run did (data loading, worker start)
  const first = sorted[0]!.time - sorted[0]!.computeMs - sorted[0]!.syncMs;
  const last = sorted.at(-1)!.time;
  const span = Math.max(last - first, 1);
  const window = span / 15;
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
  const n = Math.max(2, points);
  for (let i = 0; i < n; i++) {
    const t = first + window + ((span - window) * i) / (n - 1);
    const samples = cum[upTo(t)]! - cum[upTo(t - window)]!;
    out.time.push(round((t - t0) / 1000));
    out.samplesPerSecond.push(round(samples / (window / 1000)));
  }
  return out;
}

/**
 * Where each device spent its time. A step event is stamped when it is received, at the end of the
 * step; its compute, communication and idle time are laid out before that end, in that order, and
 * squeezed (proportionally) where they would overlap the previous step. Runs with many steps have
 * consecutive steps merged into one bar per kind, in proportion to the time each took.
 */
function timeline(steps: readonly StepInfo[], t0: number, ranks: number, maxSegments: number): RunSeries['timeline'] {
  const out: RunSeries['timeline'] = [];
  for (let rank = 0; rank < ranks; rank++) {
    const mine = steps.filter((s) => s.rank === rank).sort((a, b) => a.time - b.time);
    const per = Math.max(1, Math.ceil(mine.length / maxSegments));
    const segments: number[] = [];
    let prevEnd = -Infinity;
    for (let i = 0; i < mine.length; i += per) {
      const group = mine.slice(i, i + per);
      const parts = [0, 0, 0];
      for (const s of group) {
        parts[0] += s.computeMs;
        parts[1] += Math.max(0, s.syncMs - s.idleMs);
        parts[2] += s.idleMs;
      }
      const total = parts[0]! + parts[1]! + parts[2]!;
      const end = group.at(-1)!.time - t0;
      const start = Math.max(prevEnd, end - total);
      const scale = total > 0 ? (end - start) / total : 0;
      let at = start;
      for (let kind = 0; kind < 3; kind++) {
        const len = parts[kind]! * scale;
        if (len > 0) segments.push(round(at / 1000, 6), round((at + len) / 1000, 6), kind);
        at += len;
      }
      prevEnd = end;
    }
    out.push({ rank, segments });
  }
  return out;
}

function stalenessHistogram(steps: readonly StepInfo[]): RunSeries['staleness'] {
  const stale = steps.filter((s) => s.staleness !== undefined);
  if (stale.length === 0) return null;
  const max = Math.min(
    STALENESS_BINS - 1,
    maxOf(
      [0],
      stale.map((s) => Math.round(s.staleness!)),
    ),
  );
  const counts = new Array<number>(max + 1).fill(0);
  for (const s of stale) counts[Math.min(max, Math.max(0, Math.round(s.staleness!)))]!++;
  return { counts, dropped: steps.reduce((n, s) => n + (s.dropped ?? 0), 0) };
}
