/**
 * The events of a job's process other than 0: its own devices' steps, epochs and end, in
 * `RUN_DIR/metrics.process-<P>.jsonl` (the format of metrics.jsonl, which process 0 writes and
 * which holds process 0's devices only). Without them a multi-process run shows nothing of the
 * devices on other hosts; with them `paratrain simulate --from` and the emulated-network check
 * measure every device (an asynchronous job's devices differ: process 0's sits beside the
 * parameter server).
 *
 * The file is opened at the first step event, never before: by then the world has formed, so
 * process 0 has made (or, with --force, reused) the run directory, and this process cannot make
 * it first and have process 0 refuse it as not empty. Written only into a directory the process
 * was told of (--out or --resume; otherwise it has none).
 */
import { MetricsWriter } from './metrics.ts';
import { makeWritableDir } from '../files/writableDir.ts';

/** The file process `p` (> 0) of a job writes its events to. */
export const processMetricsFile = (p: number): string => `metrics.process-${p}.jsonl`;

/** What train() writes events to: metrics.jsonl (process 0) or this process's file. */
export interface EventRecorder {
  write<E extends { type: string }>(event: E): void;
  close(): void;
}

/** Buffers events until the first step, then writes them all to `dir`/metrics.process-<p>.jsonl. */
export class ProcessMetrics implements EventRecorder {
  private writer: MetricsWriter | null = null;
  private early: { event: { type: string }; time: number }[] = [];
  private closed = false;

  constructor(
    private readonly dir: string,
    private readonly process: number,
    private readonly truncate: boolean,
  ) {}

  write<E extends { type: string }>(event: E): void {
    if (this.closed) return;
    if (!this.writer && event.type !== 'step') {
      // events before the first step keep the time they happened at
      this.early.push({ event, time: Date.now() });
      return;
    }
    if (!this.writer) {
      makeWritableDir(this.dir);
      this.writer = new MetricsWriter(this.dir, { file: processMetricsFile(this.process), truncate: this.truncate });
      for (const e of this.early) this.writer.write({ time: e.time, ...e.event });
      this.early = [];
    }
    this.writer.write(event);
  }

  close(): void {
    this.closed = true;
    this.writer?.close();
  }
}
