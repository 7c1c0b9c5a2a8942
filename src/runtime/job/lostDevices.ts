import { deviceName, type Numbering } from './deviceNames.ts';
import type { JobShape } from './jobShape.ts';
import type { EventSink } from '../events/events.ts';
import { isDivergence } from '../device/divergenceGuard.ts';

/**
 * Devices lost by a strategy that goes on without them (async, asynchronous EASGD: see
 * survivesLostDevices). Each loss is reported once: a line for people and a `deviceLost` event
 * (metrics, `paratrain report`); the run then ends normally with the devices that remain.
 */
export class LostDevices {
  private readonly lost = new Set<number>();

  constructor(
    private readonly job: JobShape & { strategy: string },
    private readonly emit: EventSink,
    private readonly log: ((m: string) => void) | undefined,
  ) {}

  get count(): number {
    return this.lost.size;
  }

  /** Device `device` died at (or, across processes, last spoke to the server at) `step`, for `reason`. */
  report(device: number, step: number, reason: string): void {
    if (this.lost.has(device)) return;
    this.lost.add(device);
    const left = this.job.devices - this.lost.size;
    this.log?.(
      `paratrain: ${deviceName(device, this.job)} died at step ${step} (${reason}); ${this.job.strategy} goes on with ${left} of ${this.job.devices} devices`,
    );
    this.emit({ type: 'deviceLost', rank: device, step, reason });
  }
}

/** Why a device's link to the parameter server ended: its own last words, or its process's silence. */
export function lostLinkReason(device: number, job: Numbering, reason: string): string {
  // a device thread that failed aborts its links with "device d failed: …" (deviceWorker.ts)
  const failed = /^device \d+( \(process \d+\))? failed: /;
  if (failed.test(reason)) return reason.replace(failed, '');
  return `process ${Math.floor(device / job.threads)} stopped: its connection to the parameter server closed`;
}

/**
 * How a process's device threads treat a thread that failed, for a strategy that goes on without
 * it: `absorb(device, message)` counts it lost (true) unless it is device 0, which evaluates and
 * checkpoints, so the job cannot end well without it, or its training diverged (false: fail the
 * job as every other strategy does). A process that hosts a remote server leaves the report to the
 * server, which hears of every device of every process (hostParameterServer's onDeviceLost).
 */
export function threadLosses(o: {
  lost: LostDevices;
  job: Numbering;
  serverReports: boolean;
  /** frees the others from waiting for it (the shared-memory server's finish) */
  release: (device: number) => void;
  log: ((m: string) => void) | undefined;
}): { absorb(device: number, message: string): boolean; sawStep(device: number, step: number): void } {
  const reached = new Map<number, number>();
  return {
    sawStep: (device, step) => {
      reached.set(device, step + 1);
    },
    absorb(device, message) {
      // a diverged run is the job's failure, not the device's: going on would only diverge further
      if (device === 0 || isDivergence(message)) return false;
      o.release(device);
      const reason = lostLinkReason(device, o.job, message);
      if (o.serverReports)
        o.log?.(`paratrain: ${deviceName(device, o.job)} failed (${reason}); the parameter server drops it`);
      else o.lost.report(device, reached.get(device) ?? 0, reason);
      return true;
    },
  };
}
