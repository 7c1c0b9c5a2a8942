/**
 * A pipelined step's timeline: when each of a stage's ops ran, for the report's chart of the
 * schedule as it executed (report/pipelineTimeline.ts). Every stage records its own ops on its own
 * thread; times are unix milliseconds (performance.timeOrigin + performance.now()), the one clock
 * the threads of a host share, so the stages' rows line up.
 */
import type { PipelineOpKind, PipelineScheduleName } from './schedule.ts';
import type { OpTiming } from './stageStep.ts';

/** One op of a stage: ms after the timeline's origin. */
export interface TimelineOp {
  kind: PipelineOpKind;
  micro: number;
  start: number;
  end: number;
}

/** One stage's ops in one step. */
export interface StageTimeline {
  /** the global step (0-based) */
  step: number;
  stage: number;
  stages: number;
  pipeline: number;
  schedule: PipelineScheduleName;
  /** the step's micro-batches (fewer than train.microBatches for a batch with fewer samples) */
  microBatches: number;
  /** unix ms (fractional) when the stage's first op of the step began */
  origin: number;
  /** every op in the order it ran: compute (forward, backward) and messages (a receive's time is a wait) */
  ops: TimelineOp[];
}

/**
 * Every this many steps one is recorded, from step 1 on (step 0 warms the JIT and allocates the
 * copies' buffers, so it is not the schedule's own time). Timing an op is a clock read, so the cost is
 * the metrics line: one per stage every 100 steps (a few kB at most) beside the stage's 100 step lines.
 */
export const TIMELINE_EVERY = 100;

/** Whether global step `step` is one whose timeline is recorded. */
export const timelineSampled = (step: number): boolean => step % TIMELINE_EVERY === 1;

const ms = (x: number) => Math.round(x * 1000) / 1000;

/** A stage's timeline from runStageStep's timings (performance.now() of this thread). */
export function stageTimeline(
  timings: readonly OpTiming[],
  place: Omit<StageTimeline, 'origin' | 'ops'>,
): StageTimeline {
  const t0 = timings[0]?.start ?? performance.now();
  return {
    ...place,
    origin: ms(performance.timeOrigin + t0),
    ops: timings.map((t) => ({ kind: t.kind, micro: t.micro, start: ms(t.start - t0), end: ms(t.end - t0) })),
  };
}
