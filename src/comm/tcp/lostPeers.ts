/**
 * Peers lost in a star world (TcpConnectOptions.onPeerLost: the parameter server's world, where
 * rank 0 serves every other rank and the others never talk to each other). There a rank other than
 * 0 that dies takes only its own calls down: its connection ending, or an Abort it sends, fails
 * the waits for it and later sends to it with PeerFailedError naming it, and is reported once;
 * the rest of the world goes on. Without onPeerLost (every other world) any lost peer fails the
 * job (failure.ts).
 */
import { PeerFailedError } from '../errors.ts';

export class LostPeers {
  private readonly lost = new Map<number, PeerFailedError>();

  constructor(private readonly onPeerLost: ((rank: number, err: Error) => void) | undefined) {}

  /** Whether losing rank p leaves the others going (a star world, p not its hub). */
  tolerates(p: number): boolean {
    return this.onPeerLost !== undefined && p !== 0;
  }

  /** Why rank p was lost (undefined: it was not). */
  of(p: number): PeerFailedError | undefined {
    return this.lost.get(p);
  }

  /** Whether `err` is a lost peer's error (a call that failed on it does not fail the job). */
  isLoss(err: unknown): boolean {
    return err instanceof PeerFailedError && this.lost.get(err.failedRank) === err;
  }

  /** Marks rank p lost with `err` (first reason wins); `failWaits` fails the calls waiting for it. */
  lose(p: number, err: Error, failWaits: (err: PeerFailedError) => void): void {
    if (this.lost.has(p)) return;
    const e =
      err instanceof PeerFailedError && err.failedRank === p
        ? err
        : new PeerFailedError(
            p,
            err instanceof PeerFailedError ? err.reason : err.message,
            err instanceof PeerFailedError ? undefined : 'its hub',
          );
    this.lost.set(p, e);
    failWaits(e);
    try {
      this.onPeerLost?.(p, e);
    } catch {
      // a failing callback must not stop the others
    }
  }
}
