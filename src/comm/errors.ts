/**
 * Errors shared by every transport of `src/comm/` (shm, tcp). Each names the rank (or host)
 * involved, so a person reading one log line knows which process to look at.
 *
 * `src/comm/shm/errors.ts` re-exports the ones that were born there, so older imports still work.
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
 * A peer failed or the job was aborted while this rank was communicating (or about to). On shm,
 * every blocked rank throws this within about 100 ms of `world.abort()` / `comm.abort()`; on tcp,
 * when a peer's connection drops, a peer sends a corrupt frame, or a peer aborts the job.
 */
export class PeerFailedError extends Error {
  override readonly name = 'PeerFailedError';
  /** the rank that aborted the job (or whose connection failed), MAIN_THREAD (-1), or UNKNOWN_PARTY (-2) */
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
  /** how long the wait lasted, where one wait for `missing` timed out */
  readonly waitedMs: number | undefined;
  constructor(message: string, missing: number[] = [], waitedMs?: number) {
    super(message);
    this.missing = missing;
    this.waitedMs = waitedMs;
  }
}

/** Ranks called collectives out of order or with different arguments (length, root, buffer kind …). */
export class CollectiveMismatchError extends Error {
  override readonly name = 'CollectiveMismatchError';
}

/**
 * A peer could not prove it knows the job's shared secret, or refused our proof. Never retried:
 * the fix is to give every process the same secret.
 */
export class AuthenticationError extends Error {
  override readonly name = 'AuthenticationError';
  /** the rank the unauthenticated peer claimed to be, when known */
  readonly claimedRank: number | undefined;
  constructor(message: string, claimedRank?: number) {
    super(message);
    this.claimedRank = claimedRank;
  }
}

/**
 * Processes of one job were started with different model configurations (their config hashes
 * differ); `rank` is the first rank found to differ from rank 0.
 */
export class ConfigMismatchError extends Error {
  override readonly name = 'ConfigMismatchError';
  readonly rank: number;
  constructor(message: string, rank: number) {
    super(message);
    this.rank = rank;
  }
}

/**
 * The world cannot be formed as configured: two processes claim one rank, world sizes differ,
 * a rank is out of range, the master refused us for another reason …
 */
export class RendezvousError extends Error {
  override readonly name = 'RendezvousError';
}
