/**
 * Errors of the shared-memory transport. Each names the rank (or the main thread) involved, so a
 * person reading one log line knows which worker to look at.
 */

// moved to src/comm/errors.ts (shared with the tcp transport); re-exported so shm imports keep working
export {
  MAIN_THREAD,
  UNKNOWN_PARTY,
  describeParty,
  PeerFailedError,
  CommTimeoutError,
  CollectiveMismatchError,
} from '../errors.ts';

/** Misuse that one rank can detect by itself: non-shared buffer, bad rank, self-send too large, … */
export class ShmUsageError extends Error {
  override readonly name = 'ShmUsageError';
}
