/**
 * The Communicator of one process over TCP (node:net): a facade over the transport's pieces (see
 * index.ts for the design). It checks each call's arguments, runs the call (ring.ts, chain.ts,
 * pointToPoint.ts) and turns any error inside it into the job's failure (failure.ts).
 */
import os from 'node:os';
import { ownedSlice, type CollectiveStats, type Communicator, type ReduceOp } from '../communicator.ts';
import { PeerFailedError, RendezvousError } from '../errors.ts';
import { rendezvousFromEnv } from '../rendezvous.ts';
import type { BackgroundCollectives } from '../overlap.ts';
import { checkLength, type CallContext } from './callFrames.ts';
import { barrier, broadcast } from './chain.ts';
import { DataEngines } from './dataEngines.ts';
import { FailureState } from './failure.ts';
import { cappedWarnings, stderrLog } from './log.ts';
import { checkInt, resolveOptions, type TcpConnectOptions } from './options.ts';
import { PeerLinks } from './peerLinks.ts';
import { oneReaderAtATime, recv, send } from './pointToPoint.ts';
import type { RankAddress } from './rendezvous.ts';
import { ring, RING_CALLS } from './ring.ts';
import { FrameRouter } from './routing.ts';
import { LostPeers } from './lostPeers.ts';
import { resolveSecret } from './secret.ts';
import { Whereabouts } from './whereabouts.ts';

export type { TcpConnectOptions } from './options.ts';

export class TcpCommunicator implements Communicator, BackgroundCollectives {
  readonly rank: number;
  readonly size: number;
  private readonly ctx: CallContext;

  private constructor(ctx: CallContext) {
    this.ctx = ctx;
    this.rank = ctx.rank;
    this.size = ctx.size;
  }

  /**
   * Forms the world (see index.ts): rendezvous with rank 0, then connections to the ring
   * neighbours. Rejects with CommTimeoutError (a rank or the master never arrived — named, with
   * its address), AuthenticationError (secrets differ, or no secret), ConfigMismatchError
   * (configHash differs — names the rank), RendezvousError (inconsistent job), RangeError (bad options).
   */
  static async connect(options: TcpConnectOptions): Promise<TcpCommunicator> {
    const o = resolveOptions(options);
    if (os.endianness() !== 'LE')
      throw new RendezvousError('the tcp transport sends little-endian float32 and refuses big-endian hosts');
    const log = cappedWarnings(options.log ?? stderrLog(o.rankNames?.[o.rank] ?? o.rank));
    const key = resolveSecret(
      {
        secret: options.secret,
        secretFile: options.secretFile,
        allowInsecure: options.allowInsecure,
        worldSize: o.worldSize,
        env: options.env ?? process.env,
      },
      log,
    );
    const failures = new FailureState(o.rank, log, o.onFailure, o.rankNames);
    const engines = new DataEngines(o.nativeDataPath, o.maxFrameBytes);
    let router: FrameRouter | undefined;
    const links = new PeerLinks(o, key, log, failures, engines, (link, p, forget) => router!.route(link, p, forget));
    router = new FrameRouter(links, failures, engines, o.recvTimeoutMs, new LostPeers(o.onPeerLost));
    // on failure: the queues' readers first, then the world still forming and the links
    failures.onFail((err) => router!.failQueues(err));
    failures.onFail((err, abort) => links.abortAll(err, abort));
    router.whereabouts = new Whereabouts(links, failures, () => router!.entered, o.stallMs, o.rankNames);
    const comm = new TcpCommunicator({
      rank: o.rank,
      size: o.worldSize,
      o,
      links,
      router,
      failures,
      engines,
      stats: { commMs: 0, idleMs: 0, bytes: 0 },
      active: 0,
      computing: false,
      recvLocks: new Map(),
    });
    try {
      await links.form();
    } catch (err) {
      comm.shutdown();
      throw err;
    }
    return comm;
  }

  /** connect() with rank, world size and master from the environment (rendezvousFromEnv). */
  static async fromEnv(
    options: Omit<TcpConnectOptions, 'rank' | 'worldSize' | 'masterAddr' | 'masterPort'> = {},
  ): Promise<TcpCommunicator> {
    const r = rendezvousFromEnv(options.env ?? process.env);
    return TcpCommunicator.connect({
      ...options,
      rank: r.rank,
      worldSize: r.worldSize,
      masterAddr: r.masterAddr,
      masterPort: r.masterPort,
    });
  }

  /** Every rank's data address, host name and pid, by rank. */
  get peers(): readonly RankAddress[] {
    return this.ctx.links.peers;
  }

  /** This rank's data listener (undefined in a world of one). */
  get address(): { host: string; port: number } | undefined {
    return this.ctx.links.address;
  }

  /** Why the communicator failed, if it did. */
  get failed(): Error | undefined {
    return this.ctx.failures.failure;
  }

  /** Calls progress in the event loop: a caller that yields to it while computing overlaps them (comm/overlap.ts). */
  readonly progressesInBackground = true as const;

  /**
   * While the caller computes (true), ring calls keep to the JavaScript loop, whose steps run
   * between the caller's turns; the native ring, which holds the thread while it waits for data,
   * takes a call over again at its next frame boundary once told false.
   */
  computing(on: boolean): void {
    this.ctx.computing = on;
  }

  // ---------------------------------------------------------------- collectives

  async allreduce(buf: Float32Array, op: ReduceOp = 'sum'): Promise<void> {
    checkLength(buf);
    await this.call(() => ring(this.ctx, buf, op, RING_CALLS.allreduce), 'allreduce', buf.length);
  }

  async reduceScatter(buf: Float32Array, op: ReduceOp = 'sum'): Promise<{ start: number; end: number }> {
    checkLength(buf);
    await this.call(() => ring(this.ctx, buf, op, RING_CALLS.reduceScatter), 'reduceScatter', buf.length);
    return ownedSlice(buf.length, this.size, this.rank);
  }

  async allgather(buf: Float32Array): Promise<void> {
    checkLength(buf);
    await this.call(() => ring(this.ctx, buf, 'sum', RING_CALLS.allgather), 'allgather', buf.length);
  }

  async broadcast(buf: Float32Array, root: number): Promise<void> {
    checkLength(buf);
    checkInt('root', root, 0, this.size - 1);
    await this.call(() => broadcast(this.ctx, buf, root), 'broadcast', buf.length);
  }

  async barrier(): Promise<void> {
    await this.call(() => barrier(this.ctx), 'barrier', -1);
  }

  // ---------------------------------------------------------------- point to point

  async send(buf: Float32Array, dest: number, tag = 0): Promise<void> {
    checkLength(buf);
    checkInt('dest', dest, 0, this.size - 1);
    checkInt('tag', tag, 0, 0xffffffff);
    await this.call(() => send(this.ctx, buf, dest, tag), `send to rank ${dest} with tag ${tag}`, buf.length, false);
  }

  async recv(buf: Float32Array, source: number, tag = 0): Promise<void> {
    checkLength(buf);
    checkInt('source', source, 0, this.size - 1);
    checkInt('tag', tag, 0, 0xffffffff);
    await oneReaderAtATime(this.ctx, source, tag, () =>
      this.call(() => recv(this.ctx, buf, source, tag), `recv from rank ${source} with tag ${tag}`, buf.length, false),
    );
  }

  // ---------------------------------------------------------------- failure, close, stats

  /** Aborts the job: every rank's pending and later calls throw PeerFailedError naming this rank. */
  abort(reason: string): void {
    this.ctx.failures.fail(new PeerFailedError(this.rank, reason, `rank ${this.rank}`));
  }

  /**
   * Says goodbye to every peer (so they know this rank finished, not died) and closes every
   * connection once its pending writes are flushed. Idempotent.
   */
  async close(): Promise<void> {
    if (this.ctx.failures.closed) return;
    const links = this.ctx.links.sayBye();
    this.shutdown();
    await Promise.all(links.map((l) => new Promise<void>((resolve) => l.onEnd(() => resolve()))));
  }

  private shutdown(): void {
    const { failures, router, links } = this.ctx;
    failures.closed = true;
    router.failQueues(failures.failure ?? new Error(`rank ${this.rank}: the communicator is closed`));
    links.closeAll();
  }

  /**
   * What this rank answers the stall inspector of a peer besides its calls (the parameter server: its
   * devices' steps), and `awaiting(p)`: the ranks it waits for before it can answer rank p (a peer
   * that waits on this rank then names those ranks as the ones that have not arrived).
   */
  describeWhereabouts(note: () => string, awaiting?: (p: number) => number[]): void {
    const w = this.ctx.router.whereabouts;
    if (!w) return;
    w.note = note;
    w.awaiting = awaiting;
  }

  takeStats(): CollectiveStats {
    const stats = this.ctx.stats;
    const s = { commMs: stats.commMs, idleMs: stats.idleMs, bytes: stats.bytes };
    stats.commMs = 0;
    stats.idleMs = 0;
    stats.bytes = 0;
    return s;
  }

  /**
   * Runs one call: refused once failed or closed; any error inside it fails the job. `name` and
   * `n` (floats; < 0: none) describe it to the stall inspector: a collective's words are
   * `allreduce #57 of 11072 floats` (its sequence number is the router's next one).
   */
  private async call<T>(body: () => Promise<T>, name: string, n: number, collective = true): Promise<T> {
    const { failures, router } = this.ctx;
    const bad = failures.usable;
    if (bad) throw bad;
    const t0 = performance.now();
    this.ctx.active++;
    const seq = collective ? router.entered : undefined;
    const where = router.whereabouts?.enter(
      seq,
      () => `${name}${seq !== undefined ? ` #${seq}` : ''}${n >= 0 ? ` of ${n} floats` : ''}`,
    );
    try {
      return await body();
    } catch (err) {
      // a star world's lost peer fails only the calls that needed it (lostPeers.ts)
      if (this.ctx.router.lost.isLoss(err)) throw err;
      failures.fail(err as Error);
      // the root cause (e.g. the peer that died), not a secondary symptom (a failed write to it)
      throw failures.failure ?? err;
    } finally {
      if (where) router.whereabouts!.leave(where);
      this.ctx.active--;
      this.ctx.stats.commMs += performance.now() - t0;
    }
  }
}
