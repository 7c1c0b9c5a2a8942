/**
 * Failure and blame. Any error inside a call (mismatch, timeout, lost peer) aborts the job: the
 * first failure is kept, every piece that holds waits or connections is told (queues fail their
 * readers, a world still forming stops waiting, each link carries an Abort to its peer, which
 * forwards it), so every rank's pending and later calls throw PeerFailedError naming the origin
 * instead of waiting for their timeouts.
 *
 * A timeout's Abort says whom it blames and how long it waited; a blamed rank that was itself
 * stuck waiting on another rank adds that rank to the reason as "the likelier cause", so a stall
 * is traced to the stalled rank whichever neighbour's timer fired first.
 */
import { CommTimeoutError, PeerFailedError } from '../errors.ts';
import type { TcpLog } from './log.ts';

/** The body of an Abort frame. */
export interface AbortBody {
  origin: number;
  reason: string;
  /** the ranks a timed-out wait blames, and how long it waited (ms) */
  blames?: readonly number[];
  waitedMs?: number;
}

/** A wait of this rank for data from `peer`, begun at performance.now() `since`. */
export interface PeerWait {
  peer: number;
  since: number;
}

/** The job's failure (the first one), and who must hear of it. */
export class FailureState {
  private error: Error | undefined;
  /** close() was called */
  closed = false;
  /** called once by fail(), for waits that are not in a queue */
  private readonly listeners = new Set<(err: Error) => void>();
  /** the pieces that stop their waits and connections on a failure, in registration order */
  private readonly cleanups: ((err: Error, abort: AbortBody) => void)[] = [];

  constructor(
    private readonly rank: number,
    private readonly log: TcpLog,
    private readonly onFailure: ((err: Error) => void) | undefined,
    private readonly rankNames?: readonly string[],
  ) {}

  /** Why the communicator failed, if it did. */
  get failure(): Error | undefined {
    return this.error;
  }

  /** Why a call cannot start: the failure, or the communicator being closed (undefined: it can). */
  get usable(): Error | undefined {
    return this.error ?? (this.closed ? new Error(`rank ${this.rank}: the communicator is closed`) : undefined);
  }

  /** Registers a piece to stop on failure, given the error and the Abort its links should carry. */
  onFail(cleanup: (err: Error, abort: AbortBody) => void): void {
    this.cleanups.push(cleanup);
  }

  /** The job's failure if one arrives within `ms` (undefined if none). */
  within(ms: number): Promise<Error | undefined> {
    if (this.error) return Promise.resolve(this.error);
    return new Promise((resolve) => {
      const done = (err?: Error) => {
        clearTimeout(timer);
        this.listeners.delete(done);
        resolve(err);
      };
      const timer = setTimeout(done, ms);
      this.listeners.add(done);
    });
  }

  /** Fails the job with `err` (the first failure wins; nothing after close). */
  fail(err: Error): void {
    if (this.error || this.closed) return;
    this.error = err;
    for (const l of [...this.listeners]) l(err);
    // logged with the world's names for its ranks (`process 1`), when it has them
    const name = (r: number) => this.rankNames?.[r];
    this.log(
      'error',
      err instanceof PeerFailedError && name(err.failedRank) && name(this.rank)
        ? `job aborted by ${name(err.failedRank)} (noticed by ${name(this.rank)}): ${err.reason}`
        : err.message,
    );
    const origin = err instanceof PeerFailedError ? err.failedRank : this.rank;
    const reason = err instanceof PeerFailedError ? err.reason : `${err.name}: ${err.message}`;
    // whom this rank's own timed-out wait blames, and for how long it waited (see likelierCause)
    const blame =
      err instanceof CommTimeoutError && err.waitedMs !== undefined
        ? { blames: err.missing, waitedMs: err.waitedMs }
        : {};
    for (const c of this.cleanups) c(err, { origin, reason, ...blame });
    try {
      this.onFailure?.(err);
    } catch {
      // a failing callback must not hide the failure
    }
  }
}

/** Rank `p` (described by `desc`) went away: the error every rank reports for a lost peer. */
export function peerDied(rank: number, p: number, desc: string, what: string): PeerFailedError {
  return new PeerFailedError(p, `${desc}: ${what} — did that process die?`, `rank ${rank}`);
}

/**
 * The failure an Abort frame from rank `p` reports: its origin and reason, plus the likelier
 * cause when the Abort blames this rank (see likelierCause).
 */
export function abortError(
  rank: number,
  p: number,
  payload: Buffer,
  cause: (origin: number, theirMs: number) => string,
): PeerFailedError {
  let origin = p,
    reason = 'no reason given',
    blamedWaitMs = 0;
  try {
    const b = JSON.parse(payload.toString('utf8')) as {
      origin?: unknown;
      reason?: unknown;
      blames?: unknown;
      waitedMs?: unknown;
    };
    if (typeof b.origin === 'number' && Number.isInteger(b.origin)) origin = b.origin;
    if (typeof b.reason === 'string') reason = b.reason.slice(0, 2000);
    if (Array.isArray(b.blames) && b.blames.includes(rank) && typeof b.waitedMs === 'number') blamedWaitMs = b.waitedMs;
  } catch {
    // keep the defaults
  }
  if (blamedWaitMs > 0) reason += cause(origin, blamedWaitMs);
  return new PeerFailedError(origin, reason, `rank ${rank}`);
}

/**
 * Blamed by a peer's timeout after it waited `theirMs` for us: if this rank has itself waited at
 * least half that long for another rank (not `origin`), that rank is the likelier cause — the
 * race between timers decides only which of its victims speaks first. '' when there is no such wait.
 */
export function likelierCause(
  rank: number,
  waits: Iterable<PeerWait>,
  origin: number,
  theirMs: number,
  peerDesc: (p: number) => string,
): string {
  let worst: PeerWait | undefined;
  for (const w of waits) if (w.peer !== origin && (!worst || w.since < worst.since)) worst = w;
  const ms = worst ? performance.now() - worst.since : 0;
  if (!worst || ms < theirMs / 2) return '';
  return `; rank ${rank} itself had been waiting ${Math.round(ms)} ms for data from ${peerDesc(worst.peer)}, the likelier cause`;
}
