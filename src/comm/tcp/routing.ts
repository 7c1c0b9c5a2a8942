/**
 * Frame routing: which queue a frame from a peer lands in. Collective data goes to the queue of
 * its collective (by sequence number; a frame for a collective this rank has not called yet
 * waits there), send/recv data to the queue of its tag; an Abort fails the job (failure.ts), a
 * Bye on the link a peer sends on says it will send nothing more.
 *
 * With the native data path a data frame's payload can be read straight into the caller's
 * buffer once its header is in (a landing plan, landing.ts), and the first frame of a ring
 * collective this rank has not called yet can be held unread for the native ring (holdsFrame).
 */
import { CollectiveMismatchError, CommTimeoutError, PeerFailedError } from '../errors.ts';
import type { DataEngines } from './dataEngines.ts';
import { abortError, likelierCause, peerDied, type FailureState, type PeerWait } from './failure.ts';
import { FrameType, frameTypeName, type Frame, type FrameHeader } from './frame.ts';
import { LandingPlan, type LandingRange } from './landing.ts';
import type { Link } from './link.ts';
import type { PeerLinks } from './peerLinks.ts';
import { FrameQueue } from './queue.ts';
import type { LostPeers } from './lostPeers.ts';
import type { Whereabouts } from './whereabouts.ts';

/** the collectives the native ring runs */
const RING_TYPES = new Set<number>([FrameType.Allreduce, FrameType.ReduceScatter, FrameType.Allgather]);

/** How long a closed connection waits for an Abort in flight before its peer is blamed. */
const CLOSE_GRACE_MS = 50;

export class FrameRouter {
  private readonly rank: number;
  private readonly size: number;
  /** the sequence number of this rank's next collective */
  private seq = 0;
  /** by peer: its collectives' frames (by sequence number), its sends' frames (by tag) */
  private readonly collQueues: Map<number, FrameQueue>[];
  private readonly p2pQueues: Map<number, FrameQueue>[];
  /** by peer: where its frames of a collective land (by sequence number), see landing.ts */
  private readonly plans: Map<number, LandingPlan>[];
  /** by peer: floats of each collective announced before its plan existed (they went to slots) */
  private readonly announced: Map<number, number>[];
  private readonly byeFrom: boolean[];
  /** where this rank is, for peers' stall inspectors, and its own (whereabouts.ts; stallMs 0: it reports nothing) */
  whereabouts: Whereabouts | undefined;

  constructor(
    private readonly links: PeerLinks,
    private readonly failures: FailureState,
    private readonly engines: DataEngines,
    private readonly recvTimeoutMs: number,
    readonly lost: LostPeers,
  ) {
    this.rank = links.rank;
    this.size = links.size;
    const N = this.size;
    this.collQueues = Array.from({ length: N }, () => new Map());
    this.p2pQueues = Array.from({ length: N }, () => new Map());
    this.plans = Array.from({ length: N }, () => new Map());
    this.announced = Array.from({ length: N }, () => new Map());
    this.byeFrom = new Array(N).fill(false);
  }

  /** The sequence number of a collective this rank enters now. */
  nextSeq(): number {
    return this.seq++;
  }

  /** Collectives this rank has entered (the next one's sequence number). */
  get entered(): number {
    return this.seq;
  }

  /** Routes the frames of an authenticated link to/from rank p and watches its end (`forget`: the link registry's part). */
  route(link: Link, p: number, forget: () => void): void {
    const incoming = this.links.inLinks[p] === link;
    if (incoming && this.engines.dataPath.native) link.setLanding((h) => this.landing(p, h));
    if (incoming && p === (this.rank - 1 + this.size) % this.size && this.engines.nativeRing) {
      link.holdData((h) => this.holdsFrame(p, h));
    }
    let bye = false;
    link.setHandler((f) => {
      try {
        if (f.type === FrameType.Bye) {
          bye = true;
          // only the connection p dialled carries p's data: a Bye there means no more data from p
          // (a Bye on the other one may overtake data still in flight)
          if (this.links.inLinks[p] === link) this.onBye(p);
          return;
        }
        this.onFrame(p, f);
      } catch (err) {
        this.failures.fail(err as Error);
      }
    });
    link.onEnd((err) => {
      forget();
      if (this.failures.usable || bye) return;
      const what =
        err?.name === 'FrameError'
          ? `sent a malformed frame (${err.message})`
          : err
            ? `connection failed (${err.message})`
            : 'connection closed unexpectedly';
      // a peer that saw the first failure sends an Abort naming it, then exits: that Abort may still
      // be in flight on its other connection, so wait a moment before blaming this one
      setTimeout(() => {
        if (!this.failures.usable) this.failOrLose(p, peerDied(this.rank, p, this.links.peerDesc(p), what));
      }, CLOSE_GRACE_MS);
    });
  }

  /** Fails the job on rank p's loss, or (a star world, lostPeers.ts) only the calls that need p. */
  failOrLose(p: number, err: Error): void {
    if (!this.lost.tolerates(p)) {
      this.failures.fail(err);
      return;
    }
    this.lost.lose(p, err, (e) => {
      for (const q of this.queuesOf(p)) q.fail(e);
    });
  }

  /**
   * Whether a data frame from the left neighbour, its header just in, waits there (unread, the
   * socket paused) for the native ring: the first frame of a ring collective this rank has not
   * called yet. Left neighbours enter a call first; reading its frames in the event loop would
   * take CPU from the calls still in flight here (a barrier, on few cores) and keep the native
   * ring out of the call. Nothing is held while a call waits for anything from the left, and
   * such a wait (take), a failure or a close reads a held frame on: only data nobody waits for is
   * held.
   */
  private holdsFrame(p: number, h: FrameHeader): boolean {
    return RING_TYPES.has(h.type) && ((h.tag - this.seq) | 0) >= 0 && !this.failures.usable && !this.waitsFor(p);
  }

  private onFrame(p: number, f: Frame): void {
    if (this.failures.usable) return;
    switch (f.type) {
      case FrameType.P2P:
        this.p2pQueue(p, f.tag).push(f);
        return;
      case FrameType.Where:
      case FrameType.Here:
        this.whereabouts?.onFrame(p, f);
        return;
      case FrameType.Abort:
        this.failOrLose(
          p,
          abortError(this.rank, p, f.payload, (origin, theirMs) =>
            likelierCause(this.rank, this.waits(), origin, theirMs, (q) => this.links.peerDesc(q)),
          ),
        );
        return;
      default: {
        const qs = this.collQueues[p]!;
        let q = qs.get(f.tag);
        if (!q) {
          if (f.tag < this.seq) {
            throw new CollectiveMismatchError(
              `${this.links.peerDesc(p)} sent ${frameTypeName(f.type)} data for collective #${f.tag}, which rank ${this.rank} ` +
                `has already finished: the ranks called collectives with different lengths or in a different order`,
            );
          }
          q = new FrameQueue();
          qs.set(f.tag, q);
        }
        q.push(f);
      }
    }
  }

  /** Where a data frame from p whose header just arrived should be read to (undefined: a slot). */
  private landing(p: number, h: FrameHeader): Buffer | undefined {
    if (h.type !== FrameType.Allreduce && h.type !== FrameType.Allgather && h.type !== FrameType.Broadcast)
      return undefined;
    const plan = this.plans[p]!.get(h.tag);
    if (plan) return plan.take(h);
    if (h.tag >= this.seq) this.announced[p]!.set(h.tag, (this.announced[p]!.get(h.tag) ?? 0) + h.length / 4);
    return undefined;
  }

  /**
   * Lands the frames of collective `seq` from p per `ranges` (native data path only: the wasm one
   * cannot hash the caller's memory in place). Returns a function that removes the plan.
   */
  planLanding(
    p: number,
    seq: number,
    bytes: Buffer,
    expect: Pick<FrameHeader, 'type' | 'aux' | 'flags' | 'arg'>,
    ranges: LandingRange[],
  ): () => void {
    const early = this.announced[p]!.get(seq) ?? 0;
    this.announced[p]!.delete(seq);
    if (!this.engines.dataPath.native) return () => {};
    const plan = new LandingPlan(bytes, expect, ranges);
    plan.skip(early);
    this.plans[p]!.set(seq, plan);
    return () => this.plans[p]!.delete(seq);
  }

  /** Stores a received data frame's floats at `cur` of `buf` (a landed one is there already), and frees its slot. */
  store(f: Frame, src: Float32Array, buf: Float32Array, cur: number, seq: number): void {
    if (!f.landed) {
      buf.set(src, cur);
      this.engines.dataPath.putSlot(f.payload);
    } else if (f.payload.buffer !== buf.buffer || f.payload.byteOffset !== buf.byteOffset + cur * 4) {
      throw new CollectiveMismatchError(
        `collective #${seq}: a frame landed at the wrong place (rank ${this.rank}, float ${cur})`,
      );
    }
  }

  /** Rank p closed its communicator: nothing more will come from it. */
  private onBye(p: number): void {
    this.byeFrom[p] = true;
    if (this.failures.usable) return;
    if (this.waitsFor(p)) {
      this.failures.fail(
        new PeerFailedError(
          p,
          `${this.links.peerDesc(p)} closed its communicator while rank ${this.rank} still waited for its data (did the ranks call different collectives?)`,
          `rank ${this.rank}`,
        ),
      );
    }
  }

  /** Whether a call of this rank waits for a frame from rank p. */
  private waitsFor(p: number): boolean {
    for (const q of this.queuesOf(p)) if (q.waiting) return true;
    return false;
  }

  /** Every queue of frames from rank p: its collectives' and its sends'. */
  private *queuesOf(p: number): Generator<FrameQueue> {
    yield* this.collQueues[p]!.values();
    yield* this.p2pQueues[p]!.values();
  }

  /** The waits of this rank's calls for data, by peer. */
  private *waits(): Generator<PeerWait> {
    for (let p = 0; p < this.size; p++) {
      for (const q of this.queuesOf(p)) {
        const since = q.waitingSince;
        if (since !== undefined) yield { peer: p, since };
      }
    }
  }

  /** The queue of rank p's frames with `tag` (send/recv). */
  p2pQueue(p: number, tag: number): FrameQueue {
    const qs = this.p2pQueues[p]!;
    let q = qs.get(tag);
    if (!q) {
      q = new FrameQueue();
      qs.set(tag, q);
    }
    return q;
  }

  /** The queue of rank p's frames of collective `seq`; dropCollQueue when the call ends. */
  collQueue(p: number, seq: number): FrameQueue {
    const qs = this.collQueues[p]!;
    let q = qs.get(seq);
    if (!q) {
      q = new FrameQueue();
      qs.set(seq, q);
    }
    return q;
  }

  dropCollQueue(p: number, seq: number): void {
    this.collQueues[p]!.delete(seq);
  }

  /** The next frame from p in `q` (what: the call, for messages), within recvTimeoutMs. */
  take(q: FrameQueue, p: number, what: string): Promise<Frame> {
    const gone = this.lost.of(p);
    if (gone) return Promise.reject(gone);
    this.links.inLinks[p]?.releaseHeld();
    if (q.isEmpty && this.byeFrom[p]) {
      return Promise.reject(
        new PeerFailedError(
          p,
          `${this.links.peerDesc(p)} closed its communicator before sending the data of ${what} (did the ranks call different collectives?)`,
          `rank ${this.rank}`,
        ),
      );
    }
    const w = this.whereabouts;
    return q.take(
      this.recvTimeoutMs,
      () =>
        new CommTimeoutError(
          `rank ${this.rank}: ${what} timed out after ${this.recvTimeoutMs} ms waiting for data from ${this.links.peerDesc(p)}`,
          [p],
          this.recvTimeoutMs,
        ),
      w && w.stallMs > 0
        ? {
            afterMs: w.stallMs,
            warn: (since) => void w.inspect(p, what, since, [...this.p2pQueues[p]!.values()].includes(q)),
          }
        : undefined,
    );
  }

  /** Fails every queue's reader (the job failed, or the communicator closed). */
  failQueues(err: Error): void {
    for (const qs of [...this.collQueues, ...this.p2pQueues]) for (const q of qs.values()) q.fail(err);
  }
}
