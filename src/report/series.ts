/**
 * The series the HTML report draws from a run's events, downsampled so a report stays small whatever
 * its length. Times are seconds on the training clock (segments.ts): a resumed run's segments one
 * after another, with a break and a resume mark where each resume begins.
 */
import type { RunData, StepInfo } from './runData.ts';
import { maxOf, round } from './numbers.ts';
import { TrainingClock } from './segments.ts';
import { throughput, timeline, type Throughput, type Timeline } from './timeSeries.ts';

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
  /** seconds of training since the run started (a resumed run's gaps left out) */
  time: number[];
  /** training loss over the step's samples, all devices (null: not a number) */
  loss: (number | null)[];
  accuracy: (number | null)[];
  /** how many steps each point stands for (1 unless downsampled) */
  merged: number;
  /** indices of the points where a resumed segment begins: the curves break before them */
  breaks: number[];
}

/** Where a resumed segment begins: seconds on the training clock, the step it resumed from, the gap it bridged. */
export interface ResumeMark {
  time: number;
  step: number;
  /** seconds between the previous segment's last event and this start */
  gapSeconds: number;
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
  /** stall reports: seconds of training, the waiting device, how long it had waited, in what, for whom */
  stalls: { time: number; rank: number; seconds: number; waitingIn: string; missing: number[] }[];
  throughput: Throughput;
  timeline: Timeline;
  /** the resumes of a resumed run (empty: started once) */
  resumes: ResumeMark[];
  /** counts[v]: applied gradients of staleness v (the last bin: ≥ STALENESS_BINS − 1); null when not recorded */
  staleness: { counts: number[]; dropped: number } | null;
}

export function series(run: RunData): RunSeries {
  const clock = new TrainingClock(run.segments);
  const at = (t: number) => clock.seconds(t);
  return {
    steps: stepSeries(run.steps, clock, MAX_SERIES_POINTS),
    evals: run.evals
      .filter((e) => Number.isFinite(e.testLoss) || Number.isFinite(e.testAccuracy) || e.valCER !== undefined)
      .map((e) => ({
        step: e.step,
        time: at(e.time),
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
        time: at(e.time),
        epoch: e.epoch,
        accuracy: e.valAccuracy,
        loss: e.valLoss,
      })),
    lr: lrSeries(run.steps, MAX_SERIES_POINTS),
    stalls: run.stalls.map((x) => ({
      time: round(at(x.time)),
      rank: x.rank,
      seconds: round(x.seconds, 3),
      waitingIn: x.waitingIn,
      missing: x.missing,
    })),
    throughput: throughput(run.steps, clock, THROUGHPUT_POINTS),
    timeline: timeline(
      run.steps,
      clock,
      maxOf(
        [run.start.devices / run.start.processes],
        run.steps.map((s) => s.rank + 1),
      ),
      MAX_TIMELINE_SEGMENTS,
    ),
    staleness: stalenessHistogram(run.steps),
    resumes: run.segments.slice(1).map((seg, i) => ({
      time: round(clock.offsets[i + 1]! / 1000, 6),
      step: seg.resume?.step ?? seg.firstStep,
      gapSeconds: round((seg.start - run.segments[i]!.last) / 1000, 6),
    })),
  };
}

/**
 * Steps of all devices with the same global step number are combined (sample-weighted), then
 * downsampled, each segment of a resumed run on its own (a merged point never straddles a resume).
 */
export function stepSeries(steps: readonly StepInfo[], clock: TrainingClock, maxPoints: number): StepSeries {
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
  // consecutive steps of the same segment
  const parts: number[][] = [];
  let segment = -1;
  for (const k of keys) {
    const at = clock.segmentAt(byStep.get(k)!.time);
    if (at !== segment) parts.push([]);
    parts.at(-1)!.push(k);
    segment = at;
  }
  const out: StepSeries = { step: [], time: [], loss: [], accuracy: [], merged: 1, breaks: [] };
  for (const part of parts) {
    if (out.step.length > 0) out.breaks.push(out.step.length);
    const points = Math.floor(((maxPoints - parts.length) * part.length) / keys.length) + 1;
    const columns = [
      part,
      part.map((k) => clock.seconds(byStep.get(k)!.time)),
      part.map((k) => {
        const a = byStep.get(k)!;
        return a.lossW > 0 ? a.loss / a.lossW : NaN;
      }),
      part.map((k) => {
        const a = byStep.get(k)!;
        return a.accW > 0 ? a.acc / a.accW : NaN;
      }),
    ];
    const [dStep, dTime, dLoss, dAcc] = downsample(columns, points);
    out.step.push(...dStep!);
    out.time.push(...dTime!);
    out.loss.push(...dLoss!.map((x) => (Number.isFinite(x) ? x : null)));
    out.accuracy.push(...dAcc!.map((x) => (Number.isFinite(x) ? x : null)));
  }
  out.merged = Math.ceil(keys.length / Math.max(1, Math.min(maxPoints, keys.length)));
  return out;
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
