/**
 * The Communicator of one process over TCP (node:net). See index.ts for the API and the design;
 * this file holds the connection management and the collective algorithms.
 *
 * Connections are one-way for data (aborts and byes go both ways), so no two ranks ever race to
 * open one connection and each direction of a pair has exactly one ordered stream:
 *   - ring neighbours: each rank dials its LEFT neighbour to receive from it (dir 'recv'); a
 *     socket we dial can be read with `onread`, so the ring's bulk data is read by the kernel
 *     straight into payload slots (PullReader, kernel.ts) — no read buffers, no copy — or, for
 *     frames that are only stored (allgather, broadcast; native data path), straight into the
 *     caller's buffer (landing.ts);
 *   - any other pair: the sender dials on first use (dir 'send'), e.g. barrier rounds, send/recv.
 *
 * Algorithms (N ranks, n floats, segment k = ownedSlice(n, N, k), right = rank+1, left = rank−1):
 *
 *   reduce-scatter ring: step s = 0…N−2 sends segment rank−1−s to the right and adds the segment
 *     rank−2−s coming from the left into the buffer; after the last step this rank holds the
 *     reduced segment `rank`, summed along the ring (k+1, k+2, …, k for segment k) — one order
 *     per element, computed once, so every rank ends with bit-identical values.
 *   allgather ring: step s sends segment rank−s, stores segment rank−1−s from the left.
 *   allreduce = reduce-scatter then allgather ('mean' divides a segment once, by its owner, before
 *     it goes round): 2(N−1)/N · n floats sent per rank, bandwidth-optimal.
 *   Pipelining: segments travel as frames of at most `chunkBytes` (the native ring: an eighth of a
 *     segment where that is smaller, see nativeChunkFloats); each frame received is reduced
 *     and forwarded at once, so sending, receiving and reducing overlap (sends are written from
 *     the caller's buffer without copying and flushed before a call returns). The reduction adds
 *     the received slot into the caller's buffer (kernel.ts); the forwarded frame's checksum is
 *     computed in the same pass (allgather/broadcast forwards reuse the received one). A landed
 *     frame can only overwrite floats this rank has already sent: the value it carries was
 *     computed downstream from them.
 *   Native ring (nativeRing.ts, native/tcp/ring.c; where the addon is built): the ring's steps
 *     are a list that the C loop or this file's loop can advance. Whenever this call is alone and
 *     at a clean moment (our writes flushed, nothing of it queued or half-read) the C loop takes
 *     over the two ring sockets (what the left neighbour sends before this rank enters the call
 *     waits unread at its first header for it, see holdsFrame) — reading, hashing, reducing and
 *     forwarding frames with no event loop in between, which is what keeps up with Gloo when
 *     processes outnumber cores — and hands
 *     back at a frame boundary on anything else (another call's frame, an Abort, the end of a
 *     stream) or after NATIVE_SLICE_MS without data, so control frames, timers and other links
 *     are never starved for longer. The frames on the wire are the same either way.
 *   After a failed call the buffer's contents are unspecified.
 *   broadcast: a pipelined chain root → root+1 → … → root−1.
 *   barrier: dissemination, ⌈log2 N⌉ rounds (rank+2^k).
 *
 * Each data frame carries the collective's sequence number, kind, reduce op, root and length:
 * a rank called differently from its neighbour fails with CollectiveMismatchError naming both
 * calls. Any error inside a call (mismatch, timeout, lost peer) aborts the job: Abort frames go
 * to every connected peer, which forward them, so every rank's pending and later calls throw
 * PeerFailedError naming the origin instead of waiting for their timeouts. A timeout's Abort says
 * whom it blames; a blamed rank that was itself stuck waiting on another rank adds that rank to
 * the reason, so a stall is traced to the stalled rank, whichever neighbour's timer fired first.
 */
import net from 'node:net';
import os from 'node:os';
import { ownedSlice, type CollectiveStats, type Communicator, type ReduceOp } from '../communicator.ts';
import { CollectiveMismatchError, CommTimeoutError, PeerFailedError, RendezvousError } from '../errors.ts';
import { rendezvousFromEnv } from '../rendezvous.ts';
import { authenticateAsAcceptor, authenticateAsDialer, type Direction } from './auth.ts';
import { FrameError, FrameType, frameTypeName, PRE_AUTH_MAX_FRAME, type Frame, type FrameHeader } from './frame.ts';
import { TcpDataPath } from './dataPath.ts';
import { LandingPlan, type LandingRange } from './landing.ts';
import { hostPort, Link } from './link.ts';
import { NativeRing, type NativeRingOutcome, type RingStep } from './nativeRing.ts';
import { cappedWarnings, stderrLog, type TcpLog } from './log.ts';
import { FrameQueue } from './queue.ts';
import { dialWithRetry, registerWithMaster, RendezvousMaster, type RankAddress, type Registration, type WorldTable } from './rendezvous.ts';
import { resolveSecret } from './secret.ts';

export interface TcpConnectOptions {
  rank: number;
  worldSize: number;
  /** rank 0's host (default 127.0.0.1) */
  masterAddr?: string;
  /** rank 0's rendezvous port (default 29500); 0 on rank 0 = any free port, reported by onMasterListening */
  masterPort?: number;
  /**
   * Bind address of this rank's data listener (and, on rank 0, of the rendezvous server).
   * Default: rank 0 binds masterAddr; other ranks bind the local address of their connection to
   * the master — loopback when the master is on this host, the right interface otherwise.
   * '0.0.0.0' / '::' listen everywhere (then advertiseHost or that local address is advertised).
   */
  listenHost?: string;
  /** data listener port (default 0: any free port) */
  listenPort?: number;
  /** the address peers should dial to reach this rank (default: see listenHost) */
  advertiseHost?: string;
  /** the job's shared secret; see secret.ts for the order of sources */
  secret?: string | Uint8Array;
  secretFile?: string;
  /** run a multi-rank world without a secret (unauthenticated; trusted machines only) */
  allowInsecure?: boolean;
  /** a hash of the model configuration: ranks whose hash differs from rank 0's are refused */
  configHash?: string;
  /** rendezvous and connection deadline, ms (default 300 000) */
  timeoutMs?: number;
  /** longest wait for a peer's data inside one call, ms (default: timeoutMs) */
  recvTimeoutMs?: number;
  /** largest frame payload this rank accepts, bytes (default 8 MiB; 64 KiB … 1 GiB) */
  maxFrameBytes?: number;
  /** pipelining granularity of the collectives, bytes (default 1 MiB; capped by every rank's maxFrameBytes) */
  chunkBytes?: number;
  /**
   * Hash and reduce in place with the optional native addon when it is built (default true);
   * false keeps to the wasm kernel. Either gives the same bits, so ranks may differ in this.
   */
  nativeDataPath?: boolean;
  /** expected host of each rank, only for error messages (e.g. from the launcher) */
  hosts?: readonly string[];
  log?: TcpLog;
  /** rank 0: called once the rendezvous server listens (useful with masterPort 0) */
  onMasterListening?: (address: { host: string; port: number }) => void;
  /** called once when the communicator fails (peer lost, abort, timeout, mismatch) */
  onFailure?: (err: Error) => void;
  /** where to read PARATRAIN_SECRET / PARATRAIN_SECRET_FILE (default process.env) */
  env?: Record<string, string | undefined>;
}

interface Resolved {
  rank: number;
  worldSize: number;
  masterAddr: string;
  masterPort: number;
  listenHost: string | undefined;
  listenPort: number;
  advertiseHost: string | undefined;
  configHash: string;
  timeoutMs: number;
  recvTimeoutMs: number;
  maxFrameBytes: number;
  chunkBytes: number;
  hosts: readonly string[] | undefined;
  nativeDataPath: boolean;
  onMasterListening: ((a: { host: string; port: number }) => void) | undefined;
  onFailure: ((err: Error) => void) | undefined;
}

const MiB = 1024 * 1024;
const HANDSHAKE_TYPES = new Set<number>([FrameType.Hello, FrameType.Challenge, FrameType.Proof, FrameType.Welcome, FrameType.Refuse]);
const DATA_TYPES = new Set<number>([FrameType.Allreduce, FrameType.ReduceScatter, FrameType.Allgather, FrameType.Broadcast,
  FrameType.Barrier, FrameType.P2P, FrameType.Abort, FrameType.Bye]);
/** the collectives the native ring runs */
const RING_TYPES = new Set<number>([FrameType.Allreduce, FrameType.ReduceScatter, FrameType.Allgather]);
/** what a dialer accepts back on its (outbound) connection */
const BACK_TYPES = new Set<number>([FrameType.Abort, FrameType.Bye]);
const MAX_PENDING_HANDSHAKES = 64;
/** how long a dial whose handshake broke waits for the job's own failure before blaming the peer it dialled */
const HANDSHAKE_FAILURE_GRACE_MS = 1000;
const OP_FLAGS: Record<ReduceOp, number> = { sum: 0, mean: 1 };
/** longest the native ring waits for data before handing the wait back to the event loop, ms */
const NATIVE_SLICE_MS = 100;

/**
 * Frame size of the native ring: at most chunkFloats, but a segment goes as ≥ 8 frames (of ≥ 64
 * KiB), so the next rank starts reducing and forwarding after an eighth of it — with no event
 * loop per frame, small frames cost little (4 processes, alternating runs: 4 MB calls faster than
 * with one 1 MiB frame per segment; at 64 MB, 256 KiB frames were slower than 1 MiB ones).
 */
function nativeChunkFloats(segmentFloats: number, chunkFloats: number): number {
  return Math.min(chunkFloats, Math.max(16384, Math.ceil(segmentFloats / 8)));
}

function int(name: string, v: unknown, lo: number, hi: number): number {
  if (typeof v !== 'number' || !Number.isInteger(v) || v < lo || v > hi) {
    throw new RangeError(`TcpCommunicator: ${name} must be an integer in ${lo}…${hi}, got ${String(v)}`);
  }
  return v;
}

function resolveOptions(o: TcpConnectOptions): Resolved {
  const worldSize = int('worldSize', o.worldSize, 1, 65535);
  const rank = int('rank', o.rank, 0, worldSize - 1);
  const timeoutMs = int('timeoutMs', o.timeoutMs ?? 300_000, 1, 2 ** 31 - 1);
  const maxFrameBytes = int('maxFrameBytes', o.maxFrameBytes ?? 8 * MiB, 64 * 1024, 1024 * MiB);
  return {
    rank, worldSize, timeoutMs, maxFrameBytes,
    masterAddr: o.masterAddr ?? '127.0.0.1',
    masterPort: int('masterPort', o.masterPort ?? 29500, rank === 0 ? 0 : 1, 65535),
    listenHost: o.listenHost,
    listenPort: int('listenPort', o.listenPort ?? 0, 0, 65535),
    advertiseHost: o.advertiseHost,
    configHash: o.configHash ?? '',
    recvTimeoutMs: int('recvTimeoutMs', o.recvTimeoutMs ?? timeoutMs, 1, 2 ** 31 - 1),
    chunkBytes: int('chunkBytes', o.chunkBytes ?? MiB, 4, 1024 * MiB),
    hosts: o.hosts,
    nativeDataPath: o.nativeDataPath ?? true,
    onMasterListening: o.onMasterListening,
    onFailure: o.onFailure,
  };
}

const isWildcard = (h: string) => h === '0.0.0.0' || h === '::' || h === '';

function describeCall(type: number, n: number, flags: number, arg: number): string {
  const name = frameTypeName(type);
  if (type === FrameType.Barrier) return 'barrier';
  const op = type === FrameType.Allreduce || type === FrameType.ReduceScatter ? `(${flags === 1 ? 'mean' : flags === 0 ? 'sum' : `op ${flags}`})` : '';
  const root = type === FrameType.Broadcast ? ` from root ${arg}` : '';
  return `${name}${op} of ${n} floats${root}`;
}

/** dst[i] += src[i] in float32 (unrolled: V8 does not vectorise, but this halves loop overhead) */
function addInto(dst: Float32Array, src: Float32Array): void {
  const n = src.length;
  let i = 0;
  for (; i + 4 <= n; i += 4) {
    dst[i] = dst[i]! + src[i]!;
    dst[i + 1] = dst[i + 1]! + src[i + 1]!;
    dst[i + 2] = dst[i + 2]! + src[i + 2]!;
    dst[i + 3] = dst[i + 3]! + src[i + 3]!;
  }
  for (; i < n; i++) dst[i] = dst[i]! + src[i]!;
}

function divideBy(dst: Float32Array, d: number): void {
  for (let i = 0, n = dst.length; i < n; i++) dst[i] = dst[i]! / d;
}

export class TcpCommunicator implements Communicator {
  readonly rank: number;
  readonly size: number;

  private readonly o: Resolved;
  private readonly key: Buffer;
  private readonly log: TcpLog;
  private peersTable: RankAddress[] = [];
  private job = '';
  private tableReady!: () => void;
  private readonly tableKnown: Promise<void>;
  private chunkFloats = 0;

  private server: net.Server | undefined;
  private listenAddr: { host: string; port: number } | undefined;
  private readonly outLinks: (Link | undefined)[];
  private readonly outDialing: (Promise<Link> | undefined)[];
  private readonly inLinks: (Link | undefined)[];
  /** connect() waiting for rank p to dial us: called with nothing once it has, or with the job's failure */
  private readonly inWaiters: (((err?: Error) => void) | undefined)[];
  private readonly outWaiters: (((err?: Error) => void) | undefined)[];
  private readonly links = new Set<Link>();
  private readonly pending = new Set<Link>();
  private readonly byeFrom: boolean[];
  private readonly collQueues: Map<number, FrameQueue>[];
  private readonly p2pQueues: Map<number, FrameQueue>[];
  private readonly recvLocks = new Map<string, Promise<void>>();
  /** by peer: where its frames of a collective land (by sequence number), see landing.ts */
  private readonly plans: Map<number, LandingPlan>[];
  /** by peer: floats of each collective announced before its plan existed (they went to slots) */
  private readonly announced: Map<number, number>[];
  private kernelInstance: TcpDataPath | undefined;
  /** the data path (payload slots, hashing, reduction), made on first use (a world of one never needs it) */
  private get kernel(): TcpDataPath {
    return (this.kernelInstance ??= new TcpDataPath(undefined, this.o.nativeDataPath));
  }

  private nativeRingInstance: NativeRing | null | undefined;
  /** the native ring (native/tcp/ring.c), or null where the addon lacks it or nativeDataPath is off */
  private get nativeRing(): NativeRing | null {
    if (this.nativeRingInstance === undefined) {
      this.nativeRingInstance = process.env.PARATRAIN_TCP_NATIVE_RING === '0' ? null : NativeRing.of(this.kernel.native, this.o.maxFrameBytes);
    }
    return this.nativeRingInstance;
  }
  /** calls in progress (the native ring runs only when its call is alone) */
  private active = 0;

  private opSeq = 0;
  private failure: Error | undefined;
  /** called once by fail(), for waits that are not in a queue */
  private readonly failureListeners = new Set<(err: Error) => void>();
  private closed = false;
  private commMs = 0;
  private waitMs = 0;
  private bytes = 0;

  private constructor(o: Resolved, key: Buffer, log: TcpLog) {
    this.o = o;
    this.rank = o.rank;
    this.size = o.worldSize;
    this.key = key;
    this.log = log;
    const N = o.worldSize;
    this.outLinks = new Array(N).fill(undefined);
    this.outDialing = new Array(N).fill(undefined);
    this.inLinks = new Array(N).fill(undefined);
    this.inWaiters = new Array(N).fill(undefined);
    this.outWaiters = new Array(N).fill(undefined);
    this.byeFrom = new Array(N).fill(false);
    this.collQueues = Array.from({ length: N }, () => new Map());
    this.p2pQueues = Array.from({ length: N }, () => new Map());
    this.plans = Array.from({ length: N }, () => new Map());
    this.announced = Array.from({ length: N }, () => new Map());
    this.tableKnown = new Promise((resolve) => { this.tableReady = resolve; });
  }

  /**
   * Forms the world (see index.ts): rendezvous with rank 0, then connections to the ring
   * neighbours. Rejects with CommTimeoutError (a rank or the master never arrived — named, with
   * its address), AuthenticationError (secrets differ, or no secret), ConfigMismatchError
   * (configHash differs — names the rank), RendezvousError (inconsistent job), RangeError (bad options).
   */
  static async connect(options: TcpConnectOptions): Promise<TcpCommunicator> {
    const o = resolveOptions(options);
    if (os.endianness() !== 'LE') throw new RendezvousError('the tcp transport sends little-endian float32 and refuses big-endian hosts');
    const log = cappedWarnings(options.log ?? stderrLog(o.rank));
    const key = resolveSecret({ secret: options.secret, secretFile: options.secretFile, allowInsecure: options.allowInsecure, worldSize: o.worldSize, env: options.env ?? process.env }, log);
    const comm = new TcpCommunicator(o, key, log);
    if (o.worldSize === 1) {
      comm.setTable({ job: 'single', peers: [{ rank: 0, host: '', port: 0, hostname: os.hostname(), pid: process.pid }], maxFrameBytes: o.maxFrameBytes });
      return comm;
    }
    const deadline = Date.now() + o.timeoutMs;
    let master: RendezvousMaster | undefined;
    try {
      let table: WorldTable;
      if (o.rank === 0) {
        const bind = o.listenHost ?? o.masterAddr;
        const self = await comm.listen(bind, isWildcard(bind) ? o.masterAddr : bind);
        master = new RendezvousMaster({ host: bind, port: o.masterPort, key, self, deadline, timeoutMs: o.timeoutMs, hosts: o.hosts, log });
        const addr = await master.listen();
        o.onMasterListening?.(addr);
        table = await master.table;
      } else {
        table = await registerWithMaster({
          masterAddr: o.masterAddr, masterPort: o.masterPort, rank: o.rank, key, deadline, timeoutMs: o.timeoutMs, log,
          listen: (local) => {
            const bind = o.listenHost ?? local;
            return comm.listen(bind, isWildcard(bind) ? local : bind);
          },
        });
      }
      comm.setTable(table);
      await comm.connectRing(Date.now() + o.timeoutMs);
      log('debug', `world of ${o.worldSize} formed (job ${table.job})`);
      return comm;
    } catch (err) {
      master?.close(`rank 0 failed: ${(err as Error).message}`);
      comm.shutdown();
      throw err;
    }
  }

  /** connect() with rank, world size and master from the environment (rendezvousFromEnv). */
  static async fromEnv(options: Omit<TcpConnectOptions, 'rank' | 'worldSize' | 'masterAddr' | 'masterPort'> = {}): Promise<TcpCommunicator> {
    const r = rendezvousFromEnv(options.env ?? process.env);
    return TcpCommunicator.connect({ ...options, rank: r.rank, worldSize: r.worldSize, masterAddr: r.masterAddr, masterPort: r.masterPort });
  }

  /** Every rank's data address, host name and pid, by rank. */
  get peers(): readonly RankAddress[] {
    return this.peersTable;
  }

  /** This rank's data listener (undefined in a world of one). */
  get address(): { host: string; port: number } | undefined {
    return this.listenAddr;
  }

  /** Why the communicator failed, if it did. */
  get failed(): Error | undefined {
    return this.failure;
  }

  // ---------------------------------------------------------------- world formation

  private async listen(bind: string, advertise: string): Promise<Registration> {
    const server = net.createServer((socket) => this.onAccept(socket));
    server.on('error', (err) => this.log('warn', `data listener: ${err.message}`));
    await new Promise<void>((resolve, reject) => {
      const onError = (err: NodeJS.ErrnoException) => reject(new RendezvousError(
        `rank ${this.rank} cannot listen on ${hostPort(bind, this.o.listenPort)}: ${err.code ?? err.message}` +
        (err.code === 'EADDRNOTAVAIL' ? ' — that address does not belong to this host (check listenHost / MASTER_ADDR)' : '')));
      server.once('error', onError);
      server.listen(this.o.listenPort, bind, () => {
        server.off('error', onError);
        resolve();
      });
    });
    this.server = server;
    const port = (server.address() as net.AddressInfo).port;
    const host = this.o.advertiseHost ?? advertise;
    this.listenAddr = { host, port };
    return {
      rank: this.rank, worldSize: this.size, host, port, hostname: os.hostname(), pid: process.pid,
      configHash: this.o.configHash, maxFrameBytes: this.o.maxFrameBytes,
    };
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
   * land straight in kernel slots (see PullReader) — and waits for its right neighbour to dial it.
   */
  private async connectRing(deadline: number): Promise<void> {
    const N = this.size;
    const left = (this.rank - 1 + N) % N, right = (this.rank + 1) % N;
    await Promise.all([this.dial(left, 'recv', deadline), this.accepted(right, 'out', deadline)]);
  }

  private peerDesc(p: number): string {
    const a = this.peersTable[p];
    if (!a) return `rank ${p}${this.o.hosts?.[p] ? ` (expected on ${this.o.hosts[p]})` : ''}`;
    return `rank ${p} at ${hostPort(a.host, a.port)} (${a.hostname}, pid ${a.pid})`;
  }

  /** Resolves once rank p has dialled us for `kind` ('in': p sends to us; 'out': p receives from us). */
  private accepted(p: number, kind: 'in' | 'out', deadline: number): Promise<void> {
    if ((kind === 'in' ? this.inLinks : this.outLinks)[p]) return Promise.resolve();
    if (this.failure) return Promise.reject(this.failure);
    const waiters = kind === 'in' ? this.inWaiters : this.outWaiters;
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        waiters[p] = undefined;
        reject(new CommTimeoutError(`rank ${this.rank}: ${this.peerDesc(p)} did not connect within ${this.o.timeoutMs} ms after the rendezvous — ` +
          `did it fail, or can it not reach ${this.listenAddr ? hostPort(this.listenAddr.host, this.listenAddr.port) : 'this rank'} (firewall, wrong interface: see listenHost)?`, [p]));
      }, Math.max(0, deadline - Date.now()));
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
  private outLink(p: number, deadline = Date.now() + this.o.timeoutMs): Promise<Link> {
    const l = this.outLinks[p];
    if (l) return Promise.resolve(l);
    if (this.failure) return Promise.reject(this.failure);
    this.outDialing[p] ??= this.dial(p, 'send', deadline).finally(() => { this.outDialing[p] = undefined; });
    return this.outDialing[p]!;
  }

  /** Dials rank p to send to it ('send') or to receive from it ('recv'). */
  private async dial(p: number, dir: Direction, deadline: number): Promise<Link> {
    const a = this.peersTable[p]!;
    const { socket, reader } = await dialWithRetry(a.host, a.port, deadline, this.o.timeoutMs, `rank ${p} (${a.hostname})`, `rank ${this.rank}`, p,
      () => this.failure ?? (this.closed ? new Error('communicator closed') : undefined));
    const link = new Link(socket, PRE_AUTH_MAX_FRAME, HANDSHAKE_TYPES, reader);
    try {
      await authenticateAsDialer(link, {
        key: this.key, purpose: 'data', dir, myRank: this.rank, peerRank: p, job: this.job, peerDesc: this.peerDesc(p),
        deadlineMs: Math.max(1000, Math.min(deadline - Date.now(), 10_000)),
      });
    } catch (err) {
      link.destroy();
      // a socket error here (a plain Error: ECONNRESET, EPIPE, closed) means p went away before
      // the handshake ended, or that p's job failed (it drops new connections then) and its Abort
      // is still on its way on another link: blame p only if no failure arrives meanwhile.
      // Typed errors (a refusal, a wrong secret, a malformed frame) stay as they are.
      if (err instanceof Error && err.constructor === Error) {
        const failure = this.failure ?? (await this.failureWithin(HANDSHAKE_FAILURE_GRACE_MS));
        if (failure) throw failure;
        throw new PeerFailedError(p, `${this.peerDesc(p)}: the connection failed during the handshake (${err.message}) — did that process die?`, `rank ${this.rank}`);
      }
      throw this.failure ?? err;
    }
    if (this.closed || this.failure) {
      link.close();
      throw this.failure ?? new Error('communicator closed');
    }
    if (dir === 'send') {
      link.raiseLimits(64 * 1024, BACK_TYPES, this.kernel);
      this.outLinks[p] = link;
    } else {
      link.raiseLimits(this.o.maxFrameBytes, DATA_TYPES, this.kernel);
      this.inLinks[p] = link;
    }
    this.adopt(link, p);
    return link;
  }

  private onAccept(socket: net.Socket): void {
    const link = new Link(socket, PRE_AUTH_MAX_FRAME, HANDSHAKE_TYPES);
    if (this.closed || this.failure) {
      link.destroy();
      return;
    }
    if (this.pending.size >= MAX_PENDING_HANDSHAKES) {
      this.log('warn', `dropped a connection from ${link.remote} to the data port: too many unauthenticated connections`);
      link.destroy();
      return;
    }
    this.pending.add(link);
    const from = link.remote;
    const handshakeMs = Math.min(this.o.timeoutMs, 10_000);
    const tableTimer = setTimeout(() => link.destroy(), handshakeMs);
    void this.tableKnown
      .then(() => {
        clearTimeout(tableTimer);
        if (link.isEnded) throw new Error('closed before the handshake');
        return authenticateAsAcceptor(link, {
          key: this.key, purpose: 'data', myRank: this.rank, job: this.job, deadlineMs: handshakeMs,
          check: (r, dir) => (r >= this.size ? `rank ${r} is out of range (world of ${this.size})`
            : r === this.rank ? 'a rank cannot connect to itself'
            : (dir === 'send' ? this.inLinks[r] : this.outLinks[r] ?? this.outDialing[r]) ? `rank ${r} is already connected that way` : undefined),
        });
      })
      .then(({ rank: p, dir }) => {
        this.pending.delete(link);
        if (this.closed || this.failure) {
          link.close();
          return;
        }
        // the dialer's 'send' is our receiving side, and the other way round
        const waiters = dir === 'send' ? this.inWaiters : this.outWaiters;
        if (dir === 'send') {
          link.raiseLimits(this.o.maxFrameBytes, DATA_TYPES, this.kernel);
          this.inLinks[p] = link;
        } else {
          link.raiseLimits(64 * 1024, BACK_TYPES, this.kernel);
          this.outLinks[p] = link;
        }
        this.adopt(link, p);
        const w = waiters[p];
        waiters[p] = undefined;
        w?.();
      })
      .catch((err: Error) => {
        clearTimeout(tableTimer);
        this.pending.delete(link);
        this.log('warn', `rank ${this.rank} dropped a connection from ${from} to its data port: ${err.message}`);
        link.destroy();
      });
  }

  /** An authenticated link to/from rank p: route its frames, watch its end. */
  private adopt(link: Link, p: number): void {
    this.links.add(link);
    if (this.inLinks[p] === link && this.kernel.native) link.setLanding((h) => this.landing(p, h));
    if (this.inLinks[p] === link && p === (this.rank - 1 + this.size) % this.size && this.nativeRing) {
      link.holdData((h) => this.holdsFrame(p, h));
    }
    let bye = false;
    link.setHandler((f) => {
      try {
        if (f.type === FrameType.Bye) {
          bye = true;
          // only the connection p dialled carries p's data: a Bye there means no more data from p
          // (a Bye on the other one may overtake data still in flight)
          if (this.inLinks[p] === link) this.onBye(p);
          return;
        }
        this.onFrame(p, f);
      } catch (err) {
        this.fail(err as Error);
      }
    });
    link.onEnd((err) => {
      this.links.delete(link);
      if (this.outLinks[p] === link) this.outLinks[p] = undefined;
      if (this.closed || this.failure || bye) return;
      const what = err?.name === 'FrameError' ? `sent a malformed frame (${err.message})` : err ? `connection failed (${err.message})` : 'connection closed unexpectedly';
      this.fail(new PeerFailedError(p, `${this.peerDesc(p)}: ${what} — did that process die?`, `rank ${this.rank}`));
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
    return RING_TYPES.has(h.type) && ((h.tag - this.opSeq) | 0) >= 0 && !this.failure && !this.closed && !this.waitsFor(p);
  }

  private onFrame(p: number, f: Frame): void {
    if (this.closed || this.failure) return;
    switch (f.type) {
      case FrameType.P2P:
        this.p2pQueue(p, f.tag).push(f);
        return;
      case FrameType.Abort: {
        let origin = p, reason = 'no reason given', blamedWaitMs = 0;
        try {
          const b = JSON.parse(f.payload.toString('utf8')) as { origin?: unknown; reason?: unknown; blames?: unknown; waitedMs?: unknown };
          if (typeof b.origin === 'number' && Number.isInteger(b.origin)) origin = b.origin;
          if (typeof b.reason === 'string') reason = b.reason.slice(0, 2000);
          if (Array.isArray(b.blames) && b.blames.includes(this.rank) && typeof b.waitedMs === 'number') blamedWaitMs = b.waitedMs;
        } catch {
          // keep the defaults
        }
        if (blamedWaitMs > 0) reason += this.ownLongWait(origin, blamedWaitMs);
        this.fail(new PeerFailedError(origin, reason, `rank ${this.rank}`));
        return;
      }
      default: {
        const qs = this.collQueues[p]!;
        let q = qs.get(f.tag);
        if (!q) {
          if (f.tag < this.opSeq) {
            throw new CollectiveMismatchError(`${this.peerDesc(p)} sent ${frameTypeName(f.type)} data for collective #${f.tag}, which rank ${this.rank} ` +
              `has already finished: the ranks called collectives with different lengths or in a different order`);
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
    if (h.type !== FrameType.Allreduce && h.type !== FrameType.Allgather && h.type !== FrameType.Broadcast) return undefined;
    const plan = this.plans[p]!.get(h.tag);
    if (plan) return plan.take(h);
    if (h.tag >= this.opSeq) this.announced[p]!.set(h.tag, (this.announced[p]!.get(h.tag) ?? 0) + h.length / 4);
    return undefined;
  }

  /**
   * Lands the frames of collective `seq` from p per `ranges` (native data path only: the wasm one
   * cannot hash the caller's memory in place). Returns a function that removes the plan.
   */
  private planLanding(p: number, seq: number, bytes: Buffer, expect: Pick<FrameHeader, 'type' | 'aux' | 'flags' | 'arg'>, ranges: LandingRange[]): () => void {
    const early = this.announced[p]!.get(seq) ?? 0;
    this.announced[p]!.delete(seq);
    if (!this.kernel.native) return () => {};
    const plan = new LandingPlan(bytes, expect, ranges);
    plan.skip(early);
    this.plans[p]!.set(seq, plan);
    return () => this.plans[p]!.delete(seq);
  }

  /** Stores a received data frame's floats at `cur` of `buf` (a landed one is there already), and frees its slot. */
  private store(f: Frame, src: Float32Array, buf: Float32Array, cur: number, seq: number): void {
    if (!f.landed) {
      buf.set(src, cur);
      this.kernel.putSlot(f.payload);
    } else if (f.payload.buffer !== buf.buffer || f.payload.byteOffset !== buf.byteOffset + cur * 4) {
      throw new CollectiveMismatchError(`collective #${seq}: a frame landed at the wrong place (rank ${this.rank}, float ${cur})`);
    }
  }

  /** Rank p closed its communicator: nothing more will come from it. */
  private onBye(p: number): void {
    this.byeFrom[p] = true;
    if (this.closed || this.failure) return;
    if (this.waitsFor(p)) {
      this.fail(new PeerFailedError(p, `${this.peerDesc(p)} closed its communicator while rank ${this.rank} still waited for its data (did the ranks call different collectives?)`, `rank ${this.rank}`));
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

  /**
   * Blamed by a peer's timeout after it waited `theirMs` for us: if this rank has itself waited at
   * least half that long for another rank (not `origin`), that rank is the likelier cause — the
   * race between timers decides only which of its victims speaks first. '' when there is no such wait.
   */
  private ownLongWait(origin: number, theirMs: number): string {
    let worst: { p: number; since: number } | undefined;
    for (let p = 0; p < this.size; p++) {
      for (const q of this.queuesOf(p)) {
        const since = q.waitingSince;
        if (p !== origin && since !== undefined && (!worst || since < worst.since)) worst = { p, since };
      }
    }
    const ms = worst ? performance.now() - worst.since : 0;
    if (!worst || ms < theirMs / 2) return '';
    return `; rank ${this.rank} itself had been waiting ${Math.round(ms)} ms for data from ${this.peerDesc(worst.p)}, the likelier cause`;
  }

  private p2pQueue(p: number, tag: number): FrameQueue {
    const qs = this.p2pQueues[p]!;
    let q = qs.get(tag);
    if (!q) {
      q = new FrameQueue();
      qs.set(tag, q);
    }
    return q;
  }

  private collQueue(p: number, seq: number): FrameQueue {
    const qs = this.collQueues[p]!;
    let q = qs.get(seq);
    if (!q) {
      q = new FrameQueue();
      qs.set(seq, q);
    }
    return q;
  }

  // ---------------------------------------------------------------- failure and close

  /** Aborts the job: every rank's pending and later calls throw PeerFailedError naming this rank. */
  abort(reason: string): void {
    this.fail(new PeerFailedError(this.rank, reason, `rank ${this.rank}`));
  }

  /** The job's failure if one arrives within `ms` (undefined if none). */
  private failureWithin(ms: number): Promise<Error | undefined> {
    if (this.failure) return Promise.resolve(this.failure);
    return new Promise((resolve) => {
      const done = (err?: Error) => {
        clearTimeout(timer);
        this.failureListeners.delete(done);
        resolve(err);
      };
      const timer = setTimeout(done, ms);
      this.failureListeners.add(done);
    });
  }

  private fail(err: Error): void {
    if (this.failure || this.closed) return;
    this.failure = err;
    for (const l of [...this.failureListeners]) l(err);
    this.log('error', err.message);
    const origin = err instanceof PeerFailedError ? err.failedRank : this.rank;
    const reason = err instanceof PeerFailedError ? err.reason : `${err.name}: ${err.message}`;
    // whom this rank's own timed-out wait blames, and for how long it waited (see ownLongWait)
    const blame = err instanceof CommTimeoutError && err.waitedMs !== undefined ? { blames: err.missing, waitedMs: err.waitedMs } : {};
    for (const qs of [...this.collQueues, ...this.p2pQueues]) for (const q of qs.values()) q.fail(err);
    // a world still forming fails now, not when its connection deadline passes
    for (const waiters of [this.inWaiters, this.outWaiters]) {
      waiters.forEach((w, p) => {
        waiters[p] = undefined;
        w?.(err);
      });
    }
    for (const link of this.links) {
      link.releaseHeld();
      link.sendJsonAndClose(FrameType.Abort, { origin, reason, ...blame });
    }
    for (const l of this.pending) l.destroy();
    this.server?.close();
    try {
      this.o.onFailure?.(err);
    } catch {
      // a failing callback must not hide the failure
    }
  }

  private get usable(): Error | undefined {
    return this.failure ?? (this.closed ? new Error(`rank ${this.rank}: the communicator is closed`) : undefined);
  }

  /**
   * Says goodbye to every peer (so they know this rank finished, not died) and closes every
   * connection once its pending writes are flushed. Idempotent.
   */
  async close(): Promise<void> {
    if (this.closed) return;
    const links = [...this.links];
    if (!this.failure) for (const link of links) void link.send(FrameType.Bye, 0, 0);
    this.shutdown();
    await Promise.all(links.map((l) => new Promise<void>((resolve) => l.onEnd(() => resolve()))));
  }

  private shutdown(): void {
    this.closed = true;
    const err = this.failure ?? new Error(`rank ${this.rank}: the communicator is closed`);
    for (const qs of [...this.collQueues, ...this.p2pQueues]) for (const q of qs.values()) q.fail(err);
    for (const link of this.links) {
      link.releaseHeld(); // read on to the peer's Bye or end
      link.close();
    }
    for (const l of this.pending) l.destroy();
    this.server?.close();
  }

  // ---------------------------------------------------------------- plumbing of calls

  takeStats(): CollectiveStats {
    const s = { commMs: this.commMs, waitMs: this.waitMs, bytes: this.bytes };
    this.commMs = 0;
    this.waitMs = 0;
    this.bytes = 0;
    return s;
  }

  private async call<T>(body: () => Promise<T>): Promise<T> {
    const bad = this.usable;
    if (bad) throw bad;
    const t0 = performance.now();
    this.active++;
    try {
      return await body();
    } catch (err) {
      this.fail(err as Error);
      // the root cause (e.g. the peer that died), not a secondary symptom (a failed write to it)
      throw this.failure ?? err;
    } finally {
      this.active--;
      this.commMs += performance.now() - t0;
    }
  }

  private take(q: FrameQueue, p: number, what: string): Promise<Frame> {
    this.inLinks[p]?.releaseHeld();
    if (q.isEmpty && this.byeFrom[p]) {
      return Promise.reject(new PeerFailedError(p, `${this.peerDesc(p)} closed its communicator before sending the data of ${what} (did the ranks call different collectives?)`, `rank ${this.rank}`));
    }
    return q.take(this.o.recvTimeoutMs, () => new CommTimeoutError(
      `rank ${this.rank}: ${what} timed out after ${this.o.recvTimeoutMs} ms waiting for data from ${this.peerDesc(p)}`, [p], this.o.recvTimeoutMs));
  }

  /** Sends floats [a, b) of `bytes` (the buffer's bytes) to `out` in frames of at most chunkFloats. */
  private sendRange(out: Link, sends: Promise<void>[], bytes: Buffer, a: number, b: number, type: number, tag: number, aux: number, flags: number, arg: number): void {
    const c = this.chunkFloats;
    // the first frame goes at once (its checksum is all it waits for), so the next rank starts;
    // the rest as one writev: the kernel moves big writes far more cheaply
    for (let s = a; s < b; s += c) {
      const e = Math.min(b, s + c);
      if (s === a + c) out.socket.cork();
      sends.push(out.send(type, tag, aux, bytes.subarray(s * 4, e * 4), flags, arg));
      this.bytes += (e - s) * 4;
    }
    if (b - a > c) out.socket.uncork();
  }

  /** Sends floats [a, b) as one frame (forwarding what one frame brought), with a known checksum if given. */
  private sendFrame(out: Link, sends: Promise<void>[], bytes: Buffer, a: number, b: number, type: number, tag: number, aux: number, flags: number, arg: number, check: number | undefined): void {
    sends.push(out.send(type, tag, aux, bytes.subarray(a * 4, b * 4), flags, arg, check));
    this.bytes += (b - a) * 4;
  }

  /** Validates a collective data frame against this rank's own call; returns its floats. */
  private dataOf(f: Frame, p: number, seq: number, type: number, n: number, flags: number, arg: number, room: number): Float32Array {
    if (f.type !== type || f.aux !== n || f.flags !== flags || f.arg !== arg) {
      throw new CollectiveMismatchError(`collective #${seq}: rank ${this.rank} called ${describeCall(type, n, flags, arg)}, ` +
        `but rank ${p} called ${describeCall(f.type, f.aux, f.flags, f.arg)}`);
    }
    if (f.length % 4 !== 0 || f.length / 4 > room) {
      throw new CollectiveMismatchError(`collective #${seq} (${describeCall(type, n, flags, arg)}): rank ${p} sent ${f.length} bytes where ` +
        `rank ${this.rank} expected at most ${room} floats`);
    }
    this.bytes += f.length;
    return new Float32Array(f.payload.buffer, f.payload.byteOffset, f.length / 4);
  }

  private static checkLength(buf: Float32Array): void {
    if (!(buf instanceof Float32Array)) throw new TypeError('TcpCommunicator: buffers must be Float32Array');
    if (buf.length > 0xffffffff) throw new RangeError('TcpCommunicator: buffers are limited to 2^32−1 floats');
  }

  // ---------------------------------------------------------------- collectives

  async allreduce(buf: Float32Array, op: ReduceOp = 'sum'): Promise<void> {
    TcpCommunicator.checkLength(buf);
    await this.call(() => this.ring(buf, op, FrameType.Allreduce, true, true));
  }

  async reduceScatter(buf: Float32Array, op: ReduceOp = 'sum'): Promise<{ start: number; end: number }> {
    TcpCommunicator.checkLength(buf);
    await this.call(() => this.ring(buf, op, FrameType.ReduceScatter, true, false));
    return ownedSlice(buf.length, this.size, this.rank);
  }

  async allgather(buf: Float32Array): Promise<void> {
    TcpCommunicator.checkLength(buf);
    await this.call(() => this.ring(buf, 'sum', FrameType.Allgather, false, true));
  }

  private async ring(buf: Float32Array, op: ReduceOp, type: number, rs: boolean, ag: boolean): Promise<void> {
    const N = this.size, r = this.rank, n = buf.length;
    const seq = this.opSeq++;
    if (N === 1) return;
    const left = (r - 1 + N) % N, right = (r + 1) % N;
    const q = this.collQueue(left, seq);
    let unplan = () => {};
    try {
      const flags = rs ? OP_FLAGS[op] : 0;
      const bytes = Buffer.from(buf.buffer, buf.byteOffset, buf.byteLength);
      const seg = (k: number) => ownedSlice(n, N, ((k % N) + N) % N);
      const what = `${describeCall(type, n, flags, 0)} (collective #${seq})`;
      // what arrives, step by step: reduce-scatter, then allgather (see the top of this file)
      const steps: RingStep[] = [];
      for (let s = 0; rs && s < N - 1; s++) steps.push({ ...seg(r - 2 - s), reduce: true, forward: s < N - 2 || ag, div: s === N - 2 && op === 'mean' ? N : 0 });
      for (let s = 0; ag && s < N - 1; s++) steps.push({ ...seg(r - 1 - s), reduce: false, forward: s < N - 2, div: 0 });
      const first = rs ? seg(r - 1) : seg(r);
      const fields = { type, flags, arg: 0, tag: seq, aux: n };
      const out = await this.outLink(right);
      const sends: Promise<void>[] = [];
      let step = 0, cur = steps[0]!.start, sent = false, waited = false;
      /** false after a hand-over until the JS ring has taken a frame: the event loop gets its turn */
      let mayNative = true;

      /** Lets the native ring run from (step, cur) if it can now; false when it did not run. */
      const native = (): boolean => {
        const ring = this.nativeRing;
        const inLink = this.inLinks[left];
        if (!mayNative || !ring || this.active !== 1 || !q.isEmpty || !NativeRing.ready(inLink, out, seq)) return false;
        unplan();
        unplan = () => {};
        const res = ring.run(inLink, out, buf, steps, step, cur, sent ? { start: 0, end: 0 } : first, fields, {
          chunkFloats: nativeChunkFloats(first.end - first.start, this.chunkFloats), maxFrameBytes: this.o.maxFrameBytes, sliceMs: NATIVE_SLICE_MS, timeoutMs: this.o.recvTimeoutMs,
        });
        this.bytes += res.bytes;
        sent = true;
        if (res.kind === 'error') throw this.nativeRingError(res, left, right, what);
        if (!waited && (res.step !== step || res.cur !== cur)) {
          this.waitMs += res.waitMs;
          waited = true;
        }
        step = res.step;
        cur = res.cur;
        // handed over (idle, or a frame it does not expect): control frames, timers and the JS
        // timeout run before the native ring may try again
        if (res.kind === 'handover') mayNative = false;
        return true;
      };

      if (!native()) {
        if (ag) {
          const ranges: LandingRange[] = steps.map((s) => ({ start: s.start, end: s.end, land: !s.reduce }));
          unplan = this.planLanding(left, seq, bytes, { type, aux: n, flags, arg: 0 }, ranges);
        }
        this.sendRange(out, sends, bytes, first.start, first.end, type, seq, n, flags, 0);
        sent = true;
      }
      while (step < steps.length) {
        const s = steps[step]!;
        if (cur >= s.end) {
          if (++step < steps.length) cur = steps[step]!.start;
          continue;
        }
        // a clean moment (our sends written, nothing of this call pending): the native ring takes the rest
        if (native()) continue;
        const t = performance.now();
        const f = await this.take(q, left, what);
        if (!waited) this.waitMs += performance.now() - t;
        waited = true;
        mayNative = true;
        const src = this.dataOf(f, left, seq, type, n, flags, 0, s.end - cur);
        const m = src.length;
        if (m === 0) throw new CollectiveMismatchError(`collective #${seq}: rank ${left} sent an empty data frame`);
        if (s.reduce) {
          const dst = buf.subarray(cur, cur + m);
          let check = 0;
          if (f.slot) {
            check = this.kernel.reduceInto(dst, f.payload, s.div, s.forward);
            this.kernel.putSlot(f.payload);
          } else {
            addInto(dst, src);
            if (s.div) divideBy(dst, s.div);
          }
          if (s.forward) this.sendFrame(out, sends, bytes, cur, cur + m, type, seq, n, flags, 0, f.slot ? check : undefined);
        } else {
          this.store(f, src, buf, cur, seq);
          // the same bytes go on: their checksum is known
          if (s.forward) this.sendFrame(out, sends, bytes, cur, cur + m, type, seq, n, flags, 0, f.check);
        }
        cur += m;
      }
      await Promise.all(sends);
    } finally {
      unplan();
      this.collQueues[left]!.delete(seq);
    }
  }

  /** The error of a failed native ring run, as the JavaScript ring would report it; ends the link concerned. */
  private nativeRingError(res: Extract<NativeRingOutcome, { kind: 'error' }>, left: number, right: number, what: string): Error {
    const p = res.side === 'in' ? left : right;
    if (res.timeout) {
      return new CommTimeoutError(`rank ${this.rank}: ${what} timed out after ${this.o.recvTimeoutMs} ms ` +
        `${res.side === 'in' ? 'waiting for data from' : 'sending to'} ${this.peerDesc(p)} (${res.message})`, [p], this.o.recvTimeoutMs);
    }
    const link = res.side === 'in' ? this.inLinks[left] : this.outLinks[right];
    const err = res.malformed ? new FrameError(res.message) : new Error(res.message);
    link?.destroy(err);
    const what2 = res.malformed ? `sent a malformed frame (${res.message})` : `connection failed (${res.message})`;
    return this.failure ?? new PeerFailedError(p, `${this.peerDesc(p)}: ${what2} — did that process die?`, `rank ${this.rank}`);
  }

  async broadcast(buf: Float32Array, root: number): Promise<void> {
    TcpCommunicator.checkLength(buf);
    int('root', root, 0, this.size - 1);
    await this.call(async () => {
      const N = this.size, r = this.rank, n = buf.length;
      const seq = this.opSeq++;
      if (N === 1) return;
      const pos = (r - root + N) % N;
      const left = (r - 1 + N) % N, right = (r + 1) % N;
      const type = FrameType.Broadcast;
      const bytes = Buffer.from(buf.buffer, buf.byteOffset, buf.byteLength);
      const sends: Promise<void>[] = [];
      const q = pos > 0 ? this.collQueue(left, seq) : undefined;
      const unplan = pos > 0 ? this.planLanding(left, seq, bytes, { type, aux: n, flags: 0, arg: root }, [{ start: 0, end: n, land: true }]) : () => {};
      try {
        const out = pos < N - 1 ? await this.outLink(right) : undefined;
        if (pos === 0) {
          this.sendRange(out!, sends, bytes, 0, n, type, seq, n, 0, root);
        } else {
          const what = `${describeCall(type, n, 0, root)} (collective #${seq})`;
          let first = true;
          for (let cur = 0; cur < n;) {
            const t = performance.now();
            const f = await this.take(q!, left, what);
            if (first) this.waitMs += performance.now() - t;
            first = false;
            const src = this.dataOf(f, left, seq, type, n, 0, root, n - cur);
            if (src.length === 0) throw new CollectiveMismatchError(`collective #${seq}: rank ${left} sent an empty data frame`);
            this.store(f, src, buf, cur, seq);
            if (out) this.sendFrame(out, sends, bytes, cur, cur + src.length, type, seq, n, 0, root, f.check);
            cur += src.length;
          }
        }
        await Promise.all(sends);
      } finally {
        unplan();
        if (q) this.collQueues[left]!.delete(seq);
      }
    });
  }

  async barrier(): Promise<void> {
    await this.call(async () => {
      const N = this.size, r = this.rank;
      const seq = this.opSeq++;
      const sends: Promise<void>[] = [];
      const t0 = performance.now();
      // every round's queue exists before the first await: a later round's frame may come early
      const rounds: { to: number; from: number; q: FrameQueue }[] = [];
      for (let k = 1; k < N; k *= 2) {
        const from = (r - k + N) % N;
        rounds.push({ to: (r + k) % N, from, q: this.collQueue(from, seq) });
      }
      try {
        for (let round = 0; round < rounds.length; round++) {
          const { to, from, q } = rounds[round]!;
          sends.push((await this.outLink(to)).send(FrameType.Barrier, seq, 0, undefined, 0, round));
          const f = await this.take(q, from, `barrier (collective #${seq}, round ${round})`);
          if (f.type !== FrameType.Barrier || f.arg !== round || f.length !== 0) {
            throw new CollectiveMismatchError(`collective #${seq}: rank ${r} called barrier, but rank ${from} called ${describeCall(f.type, f.aux, f.flags, f.arg)}`);
          }
        }
        await Promise.all(sends);
      } finally {
        for (const { from } of rounds) this.collQueues[from]!.delete(seq);
      }
      this.waitMs += performance.now() - t0;
    });
  }

  // ---------------------------------------------------------------- point to point

  async send(buf: Float32Array, dest: number, tag = 0): Promise<void> {
    TcpCommunicator.checkLength(buf);
    int('dest', dest, 0, this.size - 1);
    int('tag', tag, 0, 0xffffffff);
    await this.call(async () => {
      const n = buf.length;
      if (dest === this.rank) {
        const payload = Buffer.from(new Uint8Array(buf.buffer, buf.byteOffset, buf.byteLength));
        this.p2pQueue(dest, tag).push({ type: FrameType.P2P, flags: 0, arg: 0, seq: 0, tag, aux: n, length: payload.length, payload, check: 0, slot: false });
        this.bytes += payload.length;
        return;
      }
      const out = await this.outLink(dest);
      const sends: Promise<void>[] = [];
      if (n === 0) sends.push(out.send(FrameType.P2P, tag, 0));
      else this.sendRange(out, sends, Buffer.from(buf.buffer, buf.byteOffset, buf.byteLength), 0, n, FrameType.P2P, tag, n, 0, 0);
      await Promise.all(sends);
    });
  }

  async recv(buf: Float32Array, source: number, tag = 0): Promise<void> {
    TcpCommunicator.checkLength(buf);
    int('source', source, 0, this.size - 1);
    int('tag', tag, 0, 0xffffffff);
    // one reader per (source, tag) at a time: a message's frames must not be split between two recvs
    const key = `${source}/${tag}`;
    const before = this.recvLocks.get(key) ?? Promise.resolve();
    let release!: () => void;
    const mine = new Promise<void>((resolve) => { release = resolve; });
    const chain = before.then(() => mine);
    this.recvLocks.set(key, chain);
    try {
      await before;
      await this.call(async () => {
        const q = this.p2pQueue(source, tag);
        const what = `recv of ${buf.length} floats with tag ${tag}`;
        let got = 0, total = -1;
        const t = performance.now();
        do {
          const f = await this.take(q, source, what);
          if (total < 0) {
            total = f.aux;
            this.waitMs += performance.now() - t;
          }
          const m = f.length / 4;
          if (f.length % 4 !== 0 || f.aux !== total || got + m > total) {
            throw new CollectiveMismatchError(`rank ${source} sent a malformed message with tag ${tag} (frame of ${f.length} bytes in a message of ${total} floats)`);
          }
          if (got < buf.length) {
            const src = new Float32Array(f.payload.buffer, f.payload.byteOffset, m);
            buf.set(src.subarray(0, Math.min(m, buf.length - got)), got);
          }
          this.kernel.putSlot(f.payload);
          got += m;
          if (source !== this.rank) this.bytes += f.length;
        } while (got < total);
        if (total !== buf.length) {
          throw new CollectiveMismatchError(`rank ${this.rank}: recv from rank ${source} with tag ${tag} expected ${buf.length} floats, but the message has ${total}`);
        }
      });
    } finally {
      release();
      if (this.recvLocks.get(key) === chain) this.recvLocks.delete(key);
    }
  }
}
