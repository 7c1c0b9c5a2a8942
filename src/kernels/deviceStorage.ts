import type { DeviceStepKernels } from './deviceStepKernels.ts';

/**
 * Arrays that live on a device. A GPU backend's `alloc` returns a host Float32Array that names a
 * device buffer: its kernels compute on the buffer, and the host copy is current only at explicit
 * points — after `toHost`, and the device copy after `fromHost`. The CPU backends have none (their
 * arrays are the storage itself), so every such point costs them nothing.
 *
 * The points are where the host needs numbers: a step's loss and outputs, gradients handed to a
 * collective (and written back), parameters a strategy averages or a checkpoint saves or loads,
 * evaluation results and predictions.
 */
export interface DeviceStorage {
  /** The step's numbers (loss sums, gradient norm, non-finite flag) computed on the device, for one read. */
  readonly stepKernels: DeviceStepKernels;
  /** Brings the arrays' device contents into their host copies, after every kernel recorded before. */
  toHost(arrays: readonly Float32Array[]): Promise<void>;
  /** The host changed these arrays: the kernels recorded after this see the host's values. */
  fromHost(arrays: readonly Float32Array[]): void;
  /** Starts what is recorded so far (a step's work, while the host does something else). */
  flush(): void;
}
