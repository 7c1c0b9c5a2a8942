/**
 * The job's shape: P processes (the launcher's RANK, 0 … P − 1) of L device threads each, G = P × L
 * devices. Computed once from the config and the launch environment (`jobShapeOf`) and passed beside
 * the config, which it leaves as it is: the config's train.devices is L, the device threads of one
 * process, in every process, every check and every file (config.yaml, checkpoints). Device d of the
 * job is thread d mod L of process ⌊d / L⌋ (deviceNames.ts).
 */
export interface JobShape {
  /** processes in the job (P; 1: the job is this process) */
  processes: number;
  /** device threads per process (L: train.devices) */
  threads: number;
  /** the job's devices, P × L: the ranks of its collectives, what the global batch is split over */
  devices: number;
  /** this process's index p, 0 … P − 1 */
  process: number;
}

/** The shape of a job of `threads` device threads per process, in `processes` (absent: the job is this process). */
export function jobShapeOf(threads: number, processes?: { rank: number; worldSize: number }): JobShape {
  const count = processes?.worldSize ?? 1;
  return { processes: count, threads, devices: count * threads, process: processes?.rank ?? 0 };
}

/** The rank of this process's first device thread. */
export function firstDeviceOf(shape: JobShape): number {
  return shape.process * shape.threads;
}
