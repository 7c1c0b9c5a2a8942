/**
 * World formation: the rendezvous with rank 0 and this rank's data listener (joinWorld.ts), then the
 * authenticated links to every peer, dialled or accepted (see index.ts). Links are one-way for
 * data: each rank dials its left ring neighbour to receive from it, so the socket carrying the
 * bulk of its incoming data is one it created and can read with `onread` straight into payload
 * slots (PullReader, link.ts); any other pair's sender dials on first use. What arrives on a link
 * is routed by routing.ts.
 */
import type net from 'node:net';
import os from 'node:os';
import { CommTimeoutError } from '../errors.ts';
import { authenticateAsAcceptor, authenticateAsDialer, type Direction } from './auth.ts';
import type { DataEngines } from './dataEngines.ts';
import { peerDied, type AbortBody, type FailureState } from './failure.ts';
import { FrameType, PRE_AUTH_MAX_FRAME } from './frame.ts';
import { descriptorOf, hostPort, Link } from './link.ts';
import type { TcpLog } from './log.ts';
import type { ResolvedOptions } from './options.ts';
import { dialWithRetry } from './dial.ts';
import { AUTH_DEADLINE_MS, StrangerGate, STRANGERS_PER_ADDRESS, STRANGERS_TOTAL } from './strangers.ts';
import { joinWorld, openDataListener, registrationOf } from './joinWorld.ts';
import type { RankAddress, Registration, WorldTable } from './rendezvous.ts';

const HANDSHAKE_TYPES = new Set<number>([
  FrameType.Hello,
  FrameType.Challenge,
  FrameType.Proof,
  FrameType.Welcome,
  FrameType.Refuse,
]);
const DATA_TYPES = new Set<number>([
  FrameType.Allreduce,
  FrameType.ReduceScatter,
  FrameType.Allgather,
  FrameType.Broadcast,
  FrameType.Barrier,
  FrameType.P2P,
  FrameType.Where,
  FrameType.Here,
  FrameType.Abort,
  FrameType.Bye,
]);
/** what a dialer accepts back on its (outbound) connection */
const BACK_TYPES = new Set<number>([FrameType.Abort, FrameType.Bye]);
/** how long a dial whose handshake broke waits for the job's own failure before blaming the peer it dialled */
const HANDSHAKE_FAILURE_GRACE_MS = 1000;

/** the gate has dropped (and logged) a connection that did not authenticate */
const noop = () => {};

/** Hands an authenticated link from/to rank p to the frame router; `forget` drops it from this registry once it ends. */
export type RouteLink = (link: Link, p: number, forget: () => void) => void;

export class PeerLinks {
  readonly rank: number;
  readonly size: number;
  private peersTable: RankAddress[] = [];
  private job = '';
  private tableReady!: () => void;
  private readonly tableKnown: Promise<void>;
  /** the collectives' frame size in floats: chunkBytes, capped by every rank's maxFrameBytes */
  chunkFloats = 0;

  private server: net.Server | undefined;
  private listenAddr: { host: string; port: number } | undefined;
  /** by peer: the link this rank sends on, and the one it receives on */
  readonly outLinks: (Link | undefined)[];
  readonly inLinks: (Link | undefined)[];
  private readonly outDialing: (Promise<Link> | undefined)[];
  /** form() waiting for rank p to dial us: called with nothing once it has, or with the job's failure */
  private readonly inWaiters: (((err?: Error) => void) | undefined)[];
  private readonly outWaiters: (((err?: Error) => void) | undefined)[];
  private readonly links = new Set<Link>();
  /** connections to the data port that have not proved the secret: the rendezvous port's gate and deadline */
  private readonly strangers: StrangerGate;

  constructor(
    private readonly o: ResolvedOptions,
    private readonly key: Buffer,
    private readonly log: TcpLog,
    private readonly failures: FailureState,
    private readonly engines: DataEngines,
    private readonly route: RouteLink,
  ) {
    this.rank = o.rank;
    this.size = o.worldSize;
    const N = o.worldSize;
    this.outLinks = new Array(N).fill(undefined);
    this.outDialing = new Array(N).fill(undefined);
    this.inLinks = new Array(N).fill(undefined);
    this.inWaiters = new Array(N).fill(undefined);
    this.outWaiters = new Array(N).fill(undefined);
    this.tableKnown = new Promise((resolve) => {
      this.tableReady = resolve;
    });
    // every other rank may dial twice (send and receive) at once, possibly all from one host: never evict them for each other
    this.strangers = new StrangerGate(
      `rank ${o.rank}'s data port`,
      log,
      Math.max(STRANGERS_PER_ADDRESS, 2 * N),
      Math.max(STRANGERS_TOTAL, 4 * N),
      Math.min(o.timeoutMs, AUTH_DEADLINE_MS),
    );
  }

  /** Every rank's data address, host name and pid, by rank. */
  get peers(): readonly RankAddress[] {
    return this.peersTable;
  }

  /** This rank's data listener (undefined in a world of one). */
  get address(): { host: string; port: number } | undefined {
    return this.listenAddr;
  }

  /**
   * Forms the world: rendezvous with rank 0 (rank 0 runs the master), then the connections to
   * the ring neighbours. A world of one opens no socket.
   */
  async form(): Promise<void> {
    const o = this.o;
    if (o.worldSize === 1) {
      this.setTable({
        job: 'single',
        peers: [{ rank: 0, host: '', port: 0, hostname: os.hostname(), pid: process.pid }],
        maxFrameBytes: o.maxFrameBytes,
      });
      return;
    }
    const deadline = Date.now() + o.timeoutMs;
    const table = await joinWorld(o, this.key, this.log, deadline, (bind, advertise) => this.listen(bind, advertise));
    this.setTable(table);
    await this.connectRing(Date.now() + o.timeoutMs);
    this.log('debug', `world of ${o.worldSize} formed (job ${table.job})`);
  }

  /** Opens this rank's data listener; returns the registration that advertises it. */
  private async listen(bind: string, advertise: string): Promise<Registration> {
    const { server, host, port } = await openDataListener(this.o, bind, advertise, (s) => this.onAccept(s), this.log);
    this.server = server;
    this.listenAddr = { host, port };
    return registrationOf(this.o, this.listenAddr);
  }

  private setTable(t: WorldTable): void {
    this.peersTable = t.peers;
    this.job = t.job;
    this.chunkFloats = Math.max(1, Math.floor(Math.min(this.o.chunkBytes, t.maxFrameBytes) / 4));
    this.tableReady();
  }

  /**
   * The ring's connections: each rank dials its left neighbour to RECEIVE from it, so that the
   * socket carrying the bulk of its incoming data is one it created — with `onread`, whose reads
   * land straight in payload slots (see PullReader) — and waits for its right neighbour to dial it.
   */
  private async connectRing(deadline: number): Promise<void> {
    const N = this.size;
    const left = (this.rank - 1 + N) % N,
      right = (this.rank + 1) % N;
    await Promise.all([this.dial(left, 'recv', deadline), this.accepted(right, 'out', deadline)]);
  }

  /** Rank p with its address, host name and pid (or its expected host before the rendezvous), for messages. */
  peerDesc(p: number): string {
    const a = this.peersTable[p];
    const name = this.o.rankNames?.[p] ?? `rank ${p}`;
    if (!a) return `${name}${this.o.hosts?.[p] ? ` (expected on ${this.o.hosts[p]})` : ''}`;
    return `${name} at ${hostPort(a.host, a.port)} (${a.hostname}, pid ${a.pid})`;
  }

  /** Resolves once rank p has dialled us for `kind` ('in': p sends to us; 'out': p receives from us). */
  private accepted(p: number, kind: 'in' | 'out', deadline: number): Promise<void> {
    if ((kind === 'in' ? this.inLinks : this.outLinks)[p]) return Promise.resolve();
    if (this.failures.failure) return Promise.reject(this.failures.failure);
    const waiters = kind === 'in' ? this.inWaiters : this.outWaiters;
    return new Promise((resolve, reject) => {
      const timer = setTimeout(
        () => {
          waiters[p] = undefined;
          reject(
            new CommTimeoutError(
              `rank ${this.rank}: ${this.peerDesc(p)} did not connect within ${this.o.timeoutMs} ms after the rendezvous — ` +
                `did it fail, or can it not reach ${this.listenAddr ? hostPort(this.listenAddr.host, this.listenAddr.port) : 'this rank'} (firewall, wrong interface: see listenHost)?`,
              [p],
            ),
          );
        },
        Math.max(0, deadline - Date.now()),
      );
      waiters[p] = (err) => {
        clearTimeout(timer);
        if (err) reject(err);
        else resolve();
      };
    });
  }

  /**
   * The authenticated connection this rank sends to `p` on: the one p dialled to receive from
   * us (ring neighbours), else one we dial on first use.
   */
  outLink(p: number, deadline = Date.now() + this.o.timeoutMs): Promise<Link> {
    const l = this.outLinks[p];
    if (l) return Promise.resolve(l);
    if (this.failures.failure) return Promise.reject(this.failures.failure);
    this.outDialing[p] ??= this.dial(p, 'send', deadline).finally(() => {
      this.outDialing[p] = undefined;
    });
    return this.outDialing[p]!;
  }

  /** Dials rank p to send to it ('send') or to receive from it ('recv'). */
  private async dial(p: number, dir: Direction, deadline: number, again = false): Promise<Link> {
    const a = this.peersTable[p]!;
    const { socket, reader, startedAt } = await dialWithRetry(
      a.host,
      a.port,
      deadline,
      again ? AUTH_DEADLINE_MS : this.o.timeoutMs,
      `rank ${p} (${a.hostname})`,
      `rank ${this.rank}`,
      p,
      () => this.failures.failure ?? (this.failures.closed ? new Error('communicator closed') : undefined),
    );
    const link = new Link(socket, PRE_AUTH_MAX_FRAME, HANDSHAKE_TYPES, reader);
    try {
      await authenticateAsDialer(link, {
        key: this.key,
        purpose: 'data',
        dir,
        myRank: this.rank,
        peerRank: p,
        job: this.job,
        peerDesc: this.peerDesc(p),
        deadlineMs: Math.max(1000, Math.min(deadline - Date.now(), 10_000)),
      });
    } catch (err) {
      link.destroy();
      // a socket error here (a plain Error: ECONNRESET, EPIPE, closed) means p went away before
      // the handshake ended, or that p's job failed (it drops new connections then) and its Abort
      // is still on its way on another link: blame p only if no failure arrives meanwhile.
      // Typed errors (a refusal, a wrong secret, a malformed frame) stay as they are.
      if (err instanceof Error && err.constructor === Error) {
        // p drops what has not proved the secret AUTH_DEADLINE_MS after its accept: this thread, busy
        // since its dial, answered too late for a p that is likely alive: dial it once more, briefly
        if (!again && !this.failures.failure && Date.now() - startedAt >= AUTH_DEADLINE_MS) {
          this.log(
            'debug',
            `rank ${this.rank}: the handshake with rank ${p} ended after this rank answered late; dialling again`,
          );
          return this.dial(p, dir, Math.min(deadline, Date.now() + AUTH_DEADLINE_MS), true);
        }
        const failure = this.failures.failure ?? (await this.failures.within(HANDSHAKE_FAILURE_GRACE_MS));
        if (failure) throw failure;
        throw peerDied(this.rank, p, this.peerDesc(p), `the connection failed during the handshake (${err.message})`);
      }
      throw this.failures.failure ?? err;
    }
    if (this.failures.usable) {
      link.close();
      throw this.failures.failure ?? new Error('communicator closed');
    }
    if (dir === 'send') {
      link.raiseLimits(64 * 1024, BACK_TYPES, this.engines.dataPath);
      this.outLinks[p] = link;
    } else {
      link.raiseLimits(this.o.maxFrameBytes, DATA_TYPES, this.engines.dataPath);
      this.inLinks[p] = link;
    }
    this.adopt(link, p);
    return link;
  }

  /**
   * A new connection passes the port's gate (strangers.ts: a flood cannot take every slot, a silent
   * one is dropped at the deadline), then carries data.
   */
  private onAccept(socket: net.Socket): void {
    const link = new Link(socket, PRE_AUTH_MAX_FRAME, HANDSHAKE_TYPES);
    if (this.failures.usable) {
      link.destroy();
      return;
    }
    void this.strangers
      .authenticate(link, async (deadlineMs) => {
        // a real rank dials once it knows the table, which this rank learns at the same moment
        await new Promise<void>((resolve, reject) => {
          void this.tableKnown.then(resolve);
          link.onEnd((err) => reject(err ?? new Error('closed before the handshake')));
        });
        return authenticateAsAcceptor(link, {
          key: this.key,
          purpose: 'data',
          myRank: this.rank,
          job: this.job,
          deadlineMs,
          check: (r, dir) =>
            r >= this.size
              ? `rank ${r} is out of range (world of ${this.size})`
              : r === this.rank
                ? 'a rank cannot connect to itself'
                : (dir === 'send' ? this.inLinks[r] : (this.outLinks[r] ?? this.outDialing[r]))
                  ? `rank ${r} is already connected that way`
                  : undefined,
        });
      })
      .then(({ rank: p, dir }) => {
        if (this.failures.usable) {
          link.close();
          return;
        }
        // the dialer's 'send' is our receiving side, and the other way round
        const waiters = dir === 'send' ? this.inWaiters : this.outWaiters;
        if (dir === 'send') {
          link.raiseLimits(this.o.maxFrameBytes, DATA_TYPES, this.engines.dataPath);
          this.inLinks[p] = link;
        } else {
          link.raiseLimits(64 * 1024, BACK_TYPES, this.engines.dataPath);
          this.outLinks[p] = link;
        }
        this.adopt(link, p);
        const w = waiters[p];
        waiters[p] = undefined;
        w?.();
      }, noop)
      .catch((err: Error) => this.strangers.drop(link, err.message));
  }

  /** An authenticated link to/from rank p: kept here until it ends, its frames routed. */
  private adopt(link: Link, p: number): void {
    this.links.add(link);
    this.route(link, p, () => {
      this.links.delete(link);
      if (this.outLinks[p] === link) this.outLinks[p] = undefined;
    });
  }

  /** On the job's failure: a world still forming fails now, every link carries the Abort. */
  abortAll(err: Error, abort: AbortBody): void {
    for (const waiters of [this.inWaiters, this.outWaiters]) {
      waiters.forEach((w, p) => {
        waiters[p] = undefined;
        w?.(err);
      });
    }
    for (const link of this.links) {
      link.releaseHeld();
      link.sendJsonAndClose(FrameType.Abort, abort);
    }
    this.strangers.closeAll();
    this.server?.close();
  }

  /**
   * The descriptors of this rank's connections other than `ring` whose frames Node is reading (not
   * ended, not paused on a held frame), and of its listener: the native ring hands back to
   * JavaScript once one of them has something, such as a peer's Abort (nativeRing.ts) or a
   * connection to accept — else a flood waits in the kernel's backlog while the ring runs step
   * after step, and the gate never sees it.
   */
  watchFds(ring: Link): number[] {
    const fds: number[] = [];
    const listener = descriptorOf(this.server);
    if (listener !== undefined) fds.push(listener);
    for (const link of this.links) {
      const fd = link.fd;
      if (link !== ring && fd !== undefined && !link.isEnded && !link.frames.heldHeader) fds.push(fd);
    }
    return fds;
  }

  /** Says goodbye on every link (this rank finished, not died); returns the links, to wait for their ends. */
  sayBye(): Link[] {
    const links = [...this.links];
    if (!this.failures.failure) for (const link of links) void link.send(FrameType.Bye, 0, 0);
    return links;
  }

  /** Closes every link once its pending writes are flushed, and the listener. */
  closeAll(): void {
    for (const link of this.links) {
      link.releaseHeld(); // read on to the peer's Bye or end
      link.close();
    }
    this.strangers.closeAll();
    this.server?.close();
  }
}
