/**
 * Step events from a device thread to its process's main thread, in batches. A message per step
 * wakes the main thread hundreds of times a second; with a core per device that time comes out of
 * the devices' (2 devices on 2 cores lost about 4% of their CPU to it), and in lockstep the device
 * it delays holds up the others. Steps are sent together every `intervalMs`; any other event first
 * sends the steps before it, so the order is kept. Each step carries the time it was emitted, which
 * the metrics file records instead of the time the batch arrived. A pipeline stage's sampled
 * timeline comes in the middle of a step: it waits with the steps rather than wake the main thread.
 */
import type { TrainEvent } from './events.ts';

export const STEP_BATCH_MS = 100;

export class StepEventBatcher {
  private pending: TrainEvent[] = [];
  private last = performance.now();

  constructor(
    private readonly send: (events: TrainEvent[]) => void,
    private readonly intervalMs = STEP_BATCH_MS,
  ) {}

  emit(event: TrainEvent): void {
    if (event.type !== 'step' && event.type !== 'pipelineTimeline') {
      this.pending.push(event);
      this.flush();
      return;
    }
    this.pending.push({ ...event, time: Date.now() });
    if (performance.now() - this.last >= this.intervalMs) this.flush();
  }

  /** Sends what is held (also before an error report and at the end). */
  flush(): void {
    this.last = performance.now();
    if (this.pending.length === 0) return;
    const events = this.pending;
    this.pending = [];
    this.send(events);
  }
}
