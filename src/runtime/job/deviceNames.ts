/**
 * One numbering of devices and processes for every message (docs/architecture.md, glossary):
 * a job has P processes (the launcher's RANK, 0 … P − 1) of L device threads each, and
 *   device d = process p × L + local ℓ,   0 ≤ d < P·L,
 * the device's rank in the job's collectives. Messages name a device as `device d`, adding
 * `(process p)` when the job spans processes, and a process as `process p`.
 */
import type { JobShape } from './jobShape.ts';

/** What a name needs of the job's shape (jobShape.ts). */
export type Numbering = Pick<JobShape, 'threads' | 'processes'>;

/** The process that holds device d. */
export function processOf(device: number, job: Numbering): number {
  return Math.floor(device / job.threads);
}

/** `device 3 (process 1)` in a job of processes, `device 3` in a job of one. */
export function deviceName(device: number, job: Numbering): string {
  return job.processes > 1 ? `device ${device} (process ${processOf(device, job)})` : `device ${device}`;
}
