/** The shared-memory transport: worker threads + SharedArrayBuffer + Atomics. */
export { createShmWorld, ShmWorld, type ShmInit, type ShmInit as ShmRankInit, type ShmWorldOptions } from './world.ts';
export { ShmCommunicator } from './shmCommunicator.ts';
export { Barrier } from './barrier.ts';
export { Mutex } from './mutex.ts';
export { AbortFlag, type AbortInfo } from './abort.ts';
export { waitWhileEqual, waitUntil, type WaitOptions } from './wait.ts';
export { PeerFailedError, CommTimeoutError, CollectiveMismatchError, ShmUsageError, MAIN_THREAD, UNKNOWN_PARTY } from './errors.ts';
