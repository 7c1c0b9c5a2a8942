/**
 * The shared-memory transport: worker threads + SharedArrayBuffer + Atomics.
 *
 * Main thread:
 *   const world = createShmWorld(G, { timeoutMs?, stagingBytes?, … });
 *   const w = new Worker(url, { workerData: { comm: world.rankInit(rank) } });
 *   world.watch(w, rank);            // a crashing rank aborts the job instead of hanging it
 *   world.abort('reason');           // releases every blocked rank with PeerFailedError
 * Worker `rank`:
 *   const comm = await ShmCommunicator.connect(workerData.comm);
 *   const grads = comm.alloc(n);     // or any SharedArrayBuffer-backed Float32Array
 *   await comm.register(grads);      // collective, same order on every rank
 *   await comm.allreduce(grads, 'mean');   // zero-copy on registered buffers
 *   comm.pathCounts();               // calls so far by path: inPlace, copyThrough, direct, staged
 * A device thread's kernels keep their heap in the arena (`useSharedHeap(comm.heapSource())`, see
 * runtime/device/deviceBackend.ts), so a replica's flat buffers are arena buffers: reduced in place.
 */
export {
  createShmWorld,
  spinFromEnv,
  ShmWorld,
  type ShmInit,
  type ShmInit as ShmRankInit,
  type ShmWorldOptions,
} from './world.ts';
export { ShmCommunicator } from './shmCommunicator.ts';
export type { PathCounts } from './collectives.ts';
export { Barrier } from './barrier.ts';
export { Mutex } from './mutex.ts';
export { AbortFlag, type AbortInfo } from './abort.ts';
export { waitWhileEqual, waitUntil, type WaitOptions } from './wait.ts';
export { AdaptiveSpin } from './adaptiveSpin.ts';
export {
  PeerFailedError,
  CommTimeoutError,
  CollectiveMismatchError,
  ShmUsageError,
  MAIN_THREAD,
  UNKNOWN_PARTY,
} from './errors.ts';
