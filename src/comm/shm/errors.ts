/**
 * Errors of the shared-memory transport. Each names the rank (or the main thread) involved, so a
 * person reading one log line knows which worker to look at.
 */

/** Who raised an abort: a rank number, or MAIN_THREAD for the orchestrating thread. */
export const MAIN_THREAD = -1;
export const UNKNOWN_PARTY = -2;

export function describeParty(party: number): string {
  if (party === MAIN_THREAD) return 'the main thread';
  if (party === UNKNOWN_PARTY) return 'an unknown party';
  return `rank ${party}`;
}

/**
 * A peer failed or the job was aborted while this rank was communicating (or about to). Every
 * blocked rank throws this within about 100 ms of `world.abort()` / `comm.abort()`.
 */
export class PeerFailedError extends Error {
  override readonly name = 'PeerFailedError';
  /** the rank that aborted the job, MAIN_THREAD (-1), or UNKNOWN_PARTY (-2) */
  readonly failedRank: number;
  readonly reason: string;
  constructor(failedRank: number, reason: string, observer?: string) {
    const who = describeParty(failedRank);
    const where = observer ? ` (noticed by ${observer})` : '';
    super(`job aborted by ${who}${where}: ${reason || 'no reason given'}`);
    this.failedRank = failedRank;
    this.reason = reason;
  }
}

/** A wait exceeded the configured `timeoutMs`; names the ranks that had not arrived. */
export class CommTimeoutError extends Error {
  override readonly name = 'CommTimeoutError';
  readonly missing: number[];
  constructor(message: string, missing: number[] = []) {
    super(message);
    this.missing = missing;
  }
}

/** Ranks called collectives out of order or with different arguments (length, root, buffer kind …). */
export class CollectiveMismatchError extends Error {
  override readonly name = 'CollectiveMismatchError';
}

/** Misuse that one rank can detect by itself: non-shared buffer, bad rank, self-send too large, … */
export class ShmUsageError extends Error {
  override readonly name = 'ShmUsageError';
}
