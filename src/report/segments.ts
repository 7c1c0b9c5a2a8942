/**
 * A run started more than once: `paratrain train --resume` appends a new segment to the run's
 * metrics.jsonl, a 'start' event followed by a 'resume' event. A report treats the segments as one
 * run: this file finds them and what each one did (how long it ran, what it trained, how it ended).
 */
import type { MetricEvent } from '../runtime/events/metrics.ts';

/** The resume that began a segment, as its 'resume' event and the two start events tell it. */
export interface ResumeInfo {
  /** the global step and epoch (0-based) it continued from */
  step: number;
  epoch: number;
  /** devices of the run saved, and of the resumed job */
  fromDevices: number;
  devices: number;
  /** the checkpoint set it continued from */
  checkpoint: string;
  /** train.epochs of the previous segment, and of this one */
  epochsBefore: number;
  epochsAfter: number;
  /** the previous segment's schedule was over: the resume trains on with more epochs (its schedule stretched) */
  scheduleFinished: boolean;
}

export interface RunSegment {
  /** unix ms of its start event, and of its last event */
  start: number;
  last: number;
  /** seconds it ran: its end event's, or (killed) from its start to its last event */
  seconds: number;
  /** samples it trained, the steps a later resume redid included: its end event's count, or (killed) its step events' */
  samples: number;
  /** the step events' global steps: the first and the last it trained (NaN: none) */
  firstStep: number;
  lastStep: number;
  /** how it ended: an end event, a stop (a signal: 'stopped' then 'end'), or none (killed, crashed) */
  ended: 'end' | 'stopped' | 'killed';
  /** what began it: null for the run's first start */
  resume: ResumeInfo | null;
}

/** Index ranges [from, to) of `all`: the segments of the run whose last start is the file's last, oldest first. */
export function segmentRanges(all: readonly MetricEvent[]): { from: number; to: number }[] {
  const starts = all.flatMap((e, i) => (e.type === 'start' ? [i] : []));
  const ranges: { from: number; to: number }[] = [];
  for (let k = starts.length - 1; k >= 0; k--) {
    const from = starts[k]!,
      to = starts[k + 1] ?? all.length;
    ranges.unshift({ from, to });
    // a segment without a resume event of its own is a run's first start: the run begins there
    if (!resumeEventOf(all.slice(from, to))) break;
  }
  return ranges;
}

/** The segment's 'resume' event (with a numeric step), or undefined for a first start. */
export function resumeEventOf(events: readonly MetricEvent[]): MetricEvent | undefined {
  return events.find((e) => e.type === 'resume' && typeof e.step === 'number');
}

const num = (v: unknown, fallback: number) => (typeof v === 'number' ? v : fallback);

/** What one segment did; `previous`: the segment's predecessor's events (null for the first). */
export function describeSegment(events: readonly MetricEvent[], previous: readonly MetricEvent[] | null): RunSegment {
  const start = events[0]!;
  let last = start.time,
    end: MetricEvent | undefined,
    firstStep = Infinity,
    lastStep = -Infinity,
    stepSamples = 0;
  for (const e of events) {
    if (typeof e.time === 'number' && e.time > last) last = e.time;
    if (e.type === 'end') end = e;
    if (e.type !== 'step') continue;
    stepSamples += num(e.samples, 0);
    const n = num(e.step, NaN);
    if (n < firstStep) firstStep = n;
    if (n > lastStep) lastStep = n;
  }
  const endSeconds = num(end?.seconds, NaN),
    endRate = num(end?.samplesPerSecond, NaN);
  const seconds = Number.isFinite(endSeconds) ? endSeconds : (last - start.time) / 1000;
  // the metrics hold the steps of process 0's devices: the job's samples are `processes` times theirs
  const samples =
    Number.isFinite(endSeconds) && Number.isFinite(endRate)
      ? Math.round(endRate * endSeconds)
      : stepSamples * num(start.processes, 1);
  return {
    start: start.time,
    last,
    seconds,
    samples,
    firstStep: Number.isFinite(firstStep) ? firstStep : NaN,
    lastStep: Number.isFinite(lastStep) ? lastStep : NaN,
    ended: !end ? 'killed' : events.some((e) => e.type === 'stopped') ? 'stopped' : 'end',
    resume: previous ? resumeInfo(events, previous) : null,
  };
}

function resumeInfo(events: readonly MetricEvent[], previous: readonly MetricEvent[]): ResumeInfo | null {
  const r = resumeEventOf(events);
  if (!r) return null;
  const before = previous[0]!,
    after = events[0]!;
  const epochsBefore = num(before.epochs, NaN);
  const stepsPerEpoch = num(before.stepsPerEpoch, NaN);
  const step = r.step as number;
  return {
    step,
    epoch: num(r.epoch, 0),
    fromDevices: num(r.fromDevices, NaN),
    devices: num(r.devices, NaN),
    checkpoint: typeof r.checkpoint === 'string' ? r.checkpoint : '?',
    epochsBefore,
    epochsAfter: num(after.epochs, NaN),
    scheduleFinished: step >= epochsBefore * stepsPerEpoch,
  };
}

/**
 * The report's wall-time axis: seconds of training, the segments laid end to end (the gaps between
 * them, possibly days, left out: they are shown as breaks and resume marks instead).
 */
export class TrainingClock {
  /** where each segment begins on the axis (ms) */
  readonly offsets: number[];

  constructor(readonly segments: readonly RunSegment[]) {
    let at = 0;
    this.offsets = segments.map((s) => {
      const o = at;
      at += Math.max(0, s.last - s.start);
      return o;
    });
  }

  /** The segment an event at unix ms `t` belongs to: the last that started at or before it. */
  segmentAt(t: number): number {
    let k = 0;
    while (k + 1 < this.segments.length && this.segments[k + 1]!.start <= t) k++;
    return k;
  }

  /** Milliseconds on the axis of the event at unix ms `t`. */
  ms(t: number): number {
    const k = this.segmentAt(t);
    const s = this.segments[k]!;
    return this.offsets[k]! + Math.min(Math.max(0, t - s.start), Math.max(0, s.last - s.start));
  }

  seconds(t: number): number {
    return this.ms(t) / 1000;
  }
}
