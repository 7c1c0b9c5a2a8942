/**
 * What a rank of the tcp transport is asked to do (TcpConnectOptions) and the checked, defaulted
 * form every other piece reads (ResolvedOptions).
 */
import type { TcpLog } from './log.ts';
import type { Agreement } from './agreement.ts';

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
  /** what else every rank must share with rank 0 (e.g. a fingerprint of its data): refused at rendezvous when it differs */
  agreements?: readonly Agreement[];
  /** rendezvous and connection deadline, ms (default 300 000) */
  timeoutMs?: number;
  /** longest wait for a peer's data inside one call, ms (default: timeoutMs) */
  recvTimeoutMs?: number;
  /**
   * The stall inspector (whereabouts.ts): a wait for a peer's data longer than this (ms) logs once
   * which ranks have not arrived and where the others are; 0 or undefined: off
   */
  stallMs?: number;
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
  /** what messages call each rank (default `rank r`), e.g. `process 1` in a world of processes */
  rankNames?: readonly string[];
  log?: TcpLog;
  /** rank 0: called once the rendezvous server listens (useful with masterPort 0) */
  onMasterListening?: (address: { host: string; port: number }) => void;
  /** called once when the communicator fails (peer lost, abort, timeout, mismatch) */
  onFailure?: (err: Error) => void;
  /**
   * A star world (the parameter server's, rank 0 the hub): a rank other than 0 that is lost (its
   * connection ends, or it sends an Abort) fails only the calls that wait for it or send to it, and
   * is reported here, rather than failing the job; losing rank 0 still fails the job. See lostPeers.ts.
   */
  onPeerLost?: (rank: number, err: Error) => void;
  /** where to read PARATRAIN_SECRET / PARATRAIN_SECRET_FILE (default process.env) */
  env?: Record<string, string | undefined>;
}

export interface ResolvedOptions {
  rank: number;
  worldSize: number;
  masterAddr: string;
  masterPort: number;
  listenHost: string | undefined;
  listenPort: number;
  advertiseHost: string | undefined;
  configHash: string;
  agreements: readonly Agreement[];
  timeoutMs: number;
  recvTimeoutMs: number;
  stallMs: number;
  maxFrameBytes: number;
  chunkBytes: number;
  hosts: readonly string[] | undefined;
  rankNames: readonly string[] | undefined;
  nativeDataPath: boolean;
  onMasterListening: ((a: { host: string; port: number }) => void) | undefined;
  onFailure: ((err: Error) => void) | undefined;
  onPeerLost: ((rank: number, err: Error) => void) | undefined;
}

const MiB = 1024 * 1024;

/** `v` as an integer in lo…hi, or a RangeError naming the option. */
export function checkInt(name: string, v: unknown, lo: number, hi: number): number {
  if (typeof v !== 'number' || !Number.isInteger(v) || v < lo || v > hi) {
    throw new RangeError(`TcpCommunicator: ${name} must be an integer in ${lo}…${hi}, got ${String(v)}`);
  }
  return v;
}

export function resolveOptions(o: TcpConnectOptions): ResolvedOptions {
  const worldSize = checkInt('worldSize', o.worldSize, 1, 65535);
  const rank = checkInt('rank', o.rank, 0, worldSize - 1);
  const timeoutMs = checkInt('timeoutMs', o.timeoutMs ?? 300_000, 1, 2 ** 31 - 1);
  const maxFrameBytes = checkInt('maxFrameBytes', o.maxFrameBytes ?? 8 * MiB, 64 * 1024, 1024 * MiB);
  return {
    rank,
    worldSize,
    timeoutMs,
    maxFrameBytes,
    masterAddr: o.masterAddr ?? '127.0.0.1',
    masterPort: checkInt('masterPort', o.masterPort ?? 29500, rank === 0 ? 0 : 1, 65535),
    listenHost: o.listenHost,
    listenPort: checkInt('listenPort', o.listenPort ?? 0, 0, 65535),
    advertiseHost: o.advertiseHost,
    configHash: o.configHash ?? '',
    agreements: o.agreements ?? [],
    recvTimeoutMs: checkInt('recvTimeoutMs', o.recvTimeoutMs ?? timeoutMs, 1, 2 ** 31 - 1),
    stallMs: checkInt('stallMs', Math.round(o.stallMs ?? 0), 0, 2 ** 31 - 1),
    chunkBytes: checkInt('chunkBytes', o.chunkBytes ?? MiB, 4, 1024 * MiB),
    hosts: o.hosts,
    rankNames: o.rankNames,
    nativeDataPath: o.nativeDataPath ?? true,
    onMasterListening: o.onMasterListening,
    onFailure: o.onFailure,
    onPeerLost: o.onPeerLost,
  };
}
