/**
 * The user's callbacks (TrainOptions onEvent, onStep, onEpoch) as one event sink. Steps are summed
 * over this process's devices and passed on once every device has finished the step (a device
 * lost since is not waited for). A callback that throws ends the run: the sink remembers the
 * first error, delivers nothing more, and rethrows it, so the caller (the training loop of one
 * device, or the main thread relaying devices' events) stops the devices; train() then rejects
 * with that very error.
 */
import type { EventSink, TrainEvent } from '../events/events.ts';
import type { StepSummary, TrainOptions } from './trainOptions.ts';

type StepEvent = Extract<TrainEvent, { type: 'step' }>;

export interface UserCallbacks {
  sink: EventSink;
  /** the first error a callback threw, boxed (null: none; a callback may throw any value) */
  readonly failure: { error: unknown } | null;
}

/** Devices firstRank … firstRank + devices − 1 are this process's. */
export function userCallbacks(
  o: Pick<TrainOptions, 'onEvent' | 'onStep' | 'onEpoch'>,
  devices: number,
  firstRank = 0,
): UserCallbacks {
  let failure: { error: unknown } | null = null;
  const pending = new Map<number, StepEvent[]>();
  const lost = new Set<number>();
  const ours = (rank: number) => rank >= firstRank && rank < firstRank + devices;
  const complete = (list: StepEvent[]) =>
    list.length + [...lost].filter((r) => !list.some((e) => e.rank === r)).length >= devices;
  const stepDone = (step: number, list: StepEvent[]) => {
    pending.delete(step);
    const samples = list.reduce((n, e) => n + e.samples, 0);
    const per = (f: (e: StepEvent) => number) => list.reduce((n, e) => n + f(e) * e.samples, 0) / Math.max(samples, 1);
    const first = list[0]!;
    const summary: StepSummary = {
      epoch: first.epoch,
      step,
      stepInEpoch: first.stepInEpoch,
      stepsPerEpoch: first.stepsPerEpoch,
      loss: per((e) => e.loss),
      accuracy: per((e) => e.accuracy),
      lr: first.lr,
      samples,
      devices: list.length,
    };
    o.onStep!(summary);
  };
  const deliver = (event: TrainEvent) => {
    o.onEvent?.(event);
    if (event.type === 'epoch' && o.onEpoch) {
      const { type: _, ...summary } = event;
      o.onEpoch(summary);
    }
    if (!o.onStep) return;
    if (event.type === 'deviceLost' && ours(event.rank)) {
      lost.add(event.rank);
      for (const [step, list] of [...pending].sort((a, b) => a[0] - b[0])) if (complete(list)) stepDone(step, list);
    }
    if (event.type !== 'step' || !ours(event.rank)) return;
    const list = pending.get(event.step) ?? [];
    list.push(event);
    pending.set(event.step, list);
    if (complete(list)) stepDone(event.step, list);
  };
  return {
    sink: (event) => {
      if (failure) return;
      try {
        deliver(event);
      } catch (error) {
        failure = { error };
        throw error;
      }
    },
    get failure() {
      return failure;
    },
  };
}
