/**
 * A synthetic metrics.jsonl of a run started more than once, as `paratrain train` and then
 * `paratrain train --resume` append it: each segment a 'start' event (a resume adds its 'resume'
 * event), steps of every device, epochs, evaluations, checkpoint sets, and an 'end' unless killed.
 */
import type { MetricEvent } from '../../src/runtime/events/metrics.ts';

export interface SegmentPlan {
  /** unix ms of the segment's start event */
  startTime: number;
  /** train.epochs of this start */
  epochs: number;
  /** the global step it starts at (0 for the first; a resume's checkpoint step) */
  fromStep: number;
  /** the step after which it was killed (no end event); absent: it ran to its last epoch and ended */
  killedAfter?: number;
}

export const STEPS_PER_EPOCH = 10;
export const BATCH = 16;
/** per device and step: compute, communication, idle (ms) */
export const STEP_MS = { compute: 20, comm: 4, idle: 6 };
/** between a segment's start and its first step (data loading, worker start) */
export const STARTUP_MS = 300;
/** sets are written every this many steps */
export const SET_EVERY = 5;

/** The events of the segments, one after another, on `devices` devices. */
export function resumedRunEvents(segments: readonly SegmentPlan[], devices = 2): MetricEvent[] {
  const out: MetricEvent[] = [];
  segments.forEach((seg, k) => {
    const stepMs = STEP_MS.compute + STEP_MS.comm + STEP_MS.idle;
    let time = seg.startTime;
    out.push({
      type: 'start',
      time,
      runDir: 'run',
      dataSource: 'synthetic',
      backend: 'js',
      devices,
      processes: 1,
      strategy: 'hybrid',
      parameters: 1000,
      trainSamples: STEPS_PER_EPOCH * BATCH * devices,
      testSamples: 50,
      epochs: seg.epochs,
      stepsPerEpoch: STEPS_PER_EPOCH,
      globalBatch: BATCH * devices,
    });
    if (k > 0)
      out.push({
        type: 'resume',
        time: time + 1,
        step: seg.fromStep,
        epoch: Math.floor(seg.fromStep / STEPS_PER_EPOCH),
        fromDevices: devices,
        devices,
        checkpoint: `run/checkpoints/step-${String(seg.fromStep).padStart(8, '0')}`,
      });
    time += STARTUP_MS;
    const last = seg.killedAfter ?? seg.epochs * STEPS_PER_EPOCH - 1;
    for (let step = seg.fromStep; step <= last; step++) {
      time += stepMs;
      for (let rank = 0; rank < devices; rank++)
        out.push({
          type: 'step',
          time: time + rank,
          rank,
          epoch: Math.floor(step / STEPS_PER_EPOCH),
          step,
          loss: 2 * Math.exp(-step / 20),
          accuracy: 0.5 + step / 100,
          lr: 0.01,
          samples: BATCH,
          computeMs: STEP_MS.compute,
          syncMs: STEP_MS.comm + STEP_MS.idle,
          idleMs: STEP_MS.idle,
          bytes: 400,
        });
      const done = step + 1;
      if (done % STEPS_PER_EPOCH === 0) {
        const epoch = done / STEPS_PER_EPOCH - 1;
        out.push({ type: 'epoch', time: time + 5, epoch, loss: 1, accuracy: 0.6, samples: 0, seconds: 1 });
        out.push({ type: 'eval', time: time + 8, epoch, step: done, testLoss: 1 - epoch / 10, testAccuracy: 0.6 });
      }
      if (done % SET_EVERY === 0) out.push({ type: 'checkpoint', time: time + 9, epoch: 0, step: done, path: 'x' });
    }
    if (seg.killedAfter === undefined) {
      time += 50;
      const seconds = (time - seg.startTime) / 1000;
      const samples = (last + 1 - seg.fromStep) * BATCH * devices;
      out.push({
        type: 'end',
        time,
        seconds,
        samplesPerSecond: samples / seconds,
        testAccuracy: 0.7,
        testLoss: 0.5,
        maxRssBytes: 1e8,
      });
    }
  });
  return out;
}

/** The last event's time of each segment: where it ended (for the expected wall times). */
export function segmentEnds(events: readonly MetricEvent[]): number[] {
  const ends: number[] = [];
  for (const e of events) {
    if (e.type === 'start') ends.push(e.time);
    else ends[ends.length - 1] = Math.max(ends.at(-1)!, e.time);
  }
  return ends;
}
