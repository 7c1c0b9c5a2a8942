/**
 * Admission of unauthenticated connections to a listening port — the rendezvous port and every
 * rank's data port alike — so that strangers cannot keep a job from forming or disturb it.
 *
 * A connection is a stranger until its handshake proves the secret. Strangers get at most
 * `perAddress` pending slots per remote address and `total` in all; a new connection is never
 * refused for lack of a slot: the OLDEST stranger of its address (or, when every slot is taken,
 * of the address holding the most) is dropped instead. A real rank authenticates within a
 * round trip or two, so idle or slow strangers are always older than it and it gets in; once
 * authenticated (`settle`) a connection no longer counts. Each stranger must prove the secret
 * within AUTH_DEADLINE_MS of its accept (`authenticate` enforces it) or is dropped.
 *
 * Drops are counted per address: the first from each address is logged, the rest only counted,
 * and `summary()` names the flood for the messages of a rendezvous that fails meanwhile.
 */
import { AuthenticationError } from '../errors.ts';
import { FrameError } from './frame.ts';
import type { Link } from './link.ts';
import type { TcpLog } from './log.ts';

export const STRANGERS_PER_ADDRESS = 16;
export const STRANGERS_TOTAL = 64;
/**
 * How long a stranger has from its accept to prove the secret (capped by the world's timeout). A
 * real rank's handshake takes a round trip or two; one whose event loop was busy between its dial
 * and its hello, and was dropped for it, dials again (peerLinks.ts).
 */
export const AUTH_DEADLINE_MS = 2000;

export class StrangerGate {
  /** pending strangers, oldest first (a Map keeps insertion order), with their remote address */
  private readonly pending = new Map<Link, string>();
  private readonly dropped = new Map<string, number>();
  private readonly evicted = new WeakSet<Link>();

  constructor(
    private readonly port: string,
    private readonly log: TcpLog,
    private readonly perAddress = STRANGERS_PER_ADDRESS,
    private readonly total = STRANGERS_TOTAL,
    /** AUTH_DEADLINE_MS, or less where the world's timeout is shorter */
    readonly deadlineMs = AUTH_DEADLINE_MS,
  ) {}

  /**
   * The gate of a port: admits a new connection, runs `handshake` (given the deadline, for its own
   * reads) and drops the connection unless it proves the secret within the deadline of its accept;
   * resolves with what the handshake resolved with, the connection settled, or rejects with why it
   * was dropped. A process with the wrong secret (it claimed a rank) is logged each time, not
   * counted among strangers: it is a misconfigured rank.
   */
  async authenticate<T>(link: Link, handshake: (deadlineMs: number) => Promise<T>): Promise<T> {
    this.admit(link, remoteAddress(link));
    const ms = this.deadlineMs;
    const timer = setTimeout(() => link.destroy(new FrameError(`the secret was not proved within ${ms} ms`)), ms);
    try {
      const peer = await handshake(ms);
      this.settle(link);
      return peer;
    } catch (err) {
      const e = err instanceof Error ? err : new Error(String(err));
      const wrongSecret = e instanceof AuthenticationError && e.claimedRank !== undefined;
      this.drop(link, e.message, !wrongSecret);
      throw e;
    } finally {
      clearTimeout(timer);
    }
  }

  /** Admits a new connection from `address` (no port), dropping the oldest stranger that must make room. */
  admit(link: Link, address: string): void {
    const ofAddress = [...this.pending].filter(([, a]) => a === address);
    if (ofAddress.length >= this.perAddress)
      this.evict(ofAddress[0]![0], `more than ${this.perAddress} unauthenticated connections from ${address}`);
    else if (this.pending.size >= this.total)
      this.evict(this.oldestOfBusiestAddress(), `more than ${this.total} unauthenticated connections`);
    this.pending.set(link, address);
  }

  /** The connection authenticated: it is no stranger any more. */
  settle(link: Link): void {
    this.pending.delete(link);
  }

  /** The connection failed its handshake (or timed out): drop it, counting it unless `counted` is false. */
  drop(link: Link, reason: string, counted = true): void {
    const address = this.pending.get(link);
    link.destroy();
    if (this.evicted.has(link)) return; // already counted
    if (address === undefined) {
      this.log('warn', `dropped an authenticated connection from ${link.remote} to ${this.port}: ${reason}`);
      return;
    }
    this.pending.delete(link);
    if (counted) this.count(address, `dropped a connection from ${link.remote} to ${this.port}: ${reason}`);
    else this.log('warn', `dropped a connection from ${link.remote} to ${this.port}: ${reason}`);
  }

  /** Drops every pending stranger (the port closes), without counting them. */
  closeAll(): void {
    for (const link of this.pending.keys()) {
      this.evicted.add(link);
      link.destroy();
    }
    this.pending.clear();
  }

  /** "64 unauthenticated connections from 127.0.0.1 (and 3 from 10.0.0.2)", or undefined when none was dropped. */
  summary(): string | undefined {
    const byCount = [...this.dropped].sort((a, b) => b[1] - a[1]);
    if (byCount.length === 0) return undefined;
    const [[addr, n], ...rest] = byCount as [[string, number], ...[string, number][]];
    const more =
      rest
        .slice(0, 3)
        .map(([a, m]) => `${m} from ${a}`)
        .join(', ') + (rest.length > 3 ? `, and ${rest.length - 3} more addresses` : '');
    return `${n} unauthenticated connection${n === 1 ? '' : 's'} from ${addr}${more ? ` (and ${more})` : ''}`;
  }

  private evict(link: Link, why: string): void {
    const address = this.pending.get(link)!;
    this.pending.delete(link);
    this.evicted.add(link);
    link.destroy();
    this.count(
      address,
      `dropped the oldest unauthenticated connection from ${link.remote} to ${this.port} to make room: ${why}`,
    );
  }

  private count(address: string, line: string): void {
    const n = (this.dropped.get(address) ?? 0) + 1;
    this.dropped.set(address, n);
    if (n === 1) this.log('warn', `${line} (further drops from ${address} are counted, not logged)`);
  }

  private oldestOfBusiestAddress(): Link {
    const counts = new Map<string, number>();
    for (const a of this.pending.values()) counts.set(a, (counts.get(a) ?? 0) + 1);
    const busiest = [...counts].sort((a, b) => b[1] - a[1])[0]![0];
    for (const [link, a] of this.pending) if (a === busiest) return link;
    throw new Error('unreachable: a full gate has a busiest address');
  }
}

/** The remote address of a link's socket, without the port (the unit of the per-address limit). */
export function remoteAddress(link: Link): string {
  return link.socket.remoteAddress ?? '?';
}
