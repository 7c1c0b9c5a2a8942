/**
 * Cost of each collective AS PARATRAIN IMPLEMENTS IT, on α-β links (docs/simulator.md has the
 * derivations). Times in seconds, sizes in bytes; `bytes` is what the transport's takeStats()
 * counts for one rank (payload sent + received), the figure metrics.jsonl reports.
 *
 * TCP (src/comm/tcp): a ring of N ranks moves a buffer of n bytes in segments of n/N (ownedSlice);
 * reduce-scatter and allgather take N − 1 ring steps each, allreduce both (S = 2(N − 1) steps). A
 * segment travels as m frames (the native ring: at most chunkBytes, at least 64 KiB, at most an
 * eighth of a segment where that is larger; ring.ts) and each frame is reduced and forwarded as soon
 * as it is in, so the steps pipeline. With frame time f = (frame + header)/β, the last frame of
 * the last step arrives at
 *     T = max(S·m·f + α,  (S + m − 1)·f + S·α)
 * (the link busy all the time, or the latency chain of one frame through S hops, whichever is
 * longer; the two paths bound every schedule and one of them is tight). With m = 1 both reduce to
 * the textbook S·(α + n/(Nβ)) = 2(N − 1)(α + n/(Nβ)) for allreduce.
 *
 * Shared memory (src/comm/shm): one process's threads meet at a barrier (α_shm) and copy/reduce
 * through memory; the bytes each rank touches are those collectives.ts counts, and the L threads
 * move theirs at once through the process's memory bandwidth β_shm: time = calls·α + L·bytes/β.
 *
 * Hierarchical (src/comm/hierarchical.ts): L threads per process, P processes: reduce-scatter over
 * shm, each thread's slice n/L all-reduced over TCP with the same thread of every process (L rings
 * share the host's link: β/L each), allgather over shm.
 */
import type { Link } from './units.ts';

/** The frame header every TCP frame carries (src/comm/tcp/frame.ts HEADER_BYTES). */
export const FRAME_HEADER_BYTES = 32;
/** The tcp transport's default chunkBytes (src/comm/tcp/options.ts). */
export const DEFAULT_CHUNK_BYTES = 1 << 20;
/** The native ring's smallest frame, 16384 floats (ring.ts nativeChunkFloats). */
export const NATIVE_MIN_FRAME_BYTES = 16384 * 4;

/** The TCP transport on a link: its α-β and the framing of ring.ts. */
export interface TcpModel {
  link: Link;
  /** frames of at most this many bytes (default 1 MiB) */
  chunkBytes?: number;
  /** the native ring's framing (default true: it runs every call when the addon is built) */
  native?: boolean;
  /** what one process's ring loop can hash, reduce and forward, bytes/s (none: the link alone limits) */
  hostRate?: number;
  /**
   * How a device in the parameter server's own process reaches it: loopback TCP through the
   * transport, α + n/β per message (default: the shared-memory α and the host rate)
   */
  loopback?: Link;
}

/** The shared-memory transport of one process: call latency and memory bandwidth. */
export interface ShmModel {
  /** barrier / call latency, seconds */
  alpha: number;
  /** bytes per second one process's memory moves (its threads share it) */
  beta: number;
}

/** One collective's time and the bytes one rank moves in it. */
export interface CollectiveCost {
  seconds: number;
  /** per rank, sent + received (TCP) or read + written (shm), as the transport counts them */
  bytes: number;
}

const ZERO: CollectiveCost = { seconds: 0, bytes: 0 };

/** Bytes of rank r's segment: ownedSlice of whole floats; the largest segment sets the pace. */
export function segmentBytes(n: number, ranks: number): number {
  return Math.ceil(n / 4 / ranks) * 4;
}

/** The frame size ring.ts uses for a segment of `seg` bytes. */
export function frameBytes(seg: number, m: TcpModel): number {
  const chunk = m.chunkBytes ?? DEFAULT_CHUNK_BYTES;
  if (m.native === false) return chunk;
  return Math.min(chunk, Math.max(NATIVE_MIN_FRAME_BYTES, Math.ceil(seg / 8 / 4) * 4));
}

/** Effective bytes/s of one stream: the link, or the host's ring loop where that is slower. */
export function streamRate(m: TcpModel, share = 1): number {
  const link = m.link.beta / share;
  return m.hostRate ? Math.min(link, m.hostRate) : link;
}

/** Time of S pipelined ring steps of `seg`-byte segments (see the header). */
export function ringStepsTime(S: number, seg: number, m: TcpModel, share = 1): number {
  if (S <= 0 || seg <= 0) return 0;
  const frame = frameBytes(seg, m);
  const frames = Math.max(1, Math.ceil(seg / frame));
  const f = (seg / frames + FRAME_HEADER_BYTES) / streamRate(m, share);
  const alpha = m.link.alpha;
  return Math.max(S * frames * f + alpha, (S + frames - 1) * f + S * alpha);
}

/** The loopback path of a device beside the parameter server (TcpModel.loopback or its default). */
export function loopbackOf(net: { tcp: TcpModel; shm: ShmModel }): { alpha: number; beta: number } {
  return net.tcp.loopback ?? { alpha: net.shm.alpha, beta: net.tcp.hostRate ?? net.shm.beta };
}

/** TCP ring allreduce of n bytes over N ranks (reduce-scatter then allgather). */
export function ringAllreduce(n: number, N: number, m: TcpModel, share = 1): CollectiveCost {
  if (N <= 1 || n <= 0) return ZERO;
  const seg = segmentBytes(n, N);
  return { seconds: ringStepsTime(2 * (N - 1), seg, m, share), bytes: 2 * 2 * (N - 1) * seg };
}

/** TCP ring reduce-scatter or allgather of an n-byte buffer over N ranks (N − 1 steps each). */
export function ringHalf(n: number, N: number, m: TcpModel, share = 1): CollectiveCost {
  if (N <= 1 || n <= 0) return ZERO;
  const seg = segmentBytes(n, N);
  return { seconds: ringStepsTime(N - 1, seg, m, share), bytes: 2 * (N - 1) * seg };
}

/**
 * TCP broadcast: a pipelined chain root → … → root − 1 in frames of chunkBytes (chain.ts); the last
 * rank has the last frame after (frames + N − 2) frame times and N − 1 latencies.
 */
export function chainBroadcast(n: number, N: number, m: TcpModel): CollectiveCost {
  if (N <= 1 || n <= 0) return ZERO;
  const chunk = m.chunkBytes ?? DEFAULT_CHUNK_BYTES;
  const frames = Math.ceil(n / chunk);
  const f = (n / frames + FRAME_HEADER_BYTES) / streamRate(m);
  // an inner rank receives and forwards the buffer
  return { seconds: (frames + N - 2) * f + (N - 1) * m.link.alpha, bytes: 2 * n };
}

/** TCP barrier: dissemination, ⌈log2 N⌉ rounds of one empty frame. */
export function disseminationBarrier(N: number, m: TcpModel): CollectiveCost {
  if (N <= 1) return ZERO;
  return { seconds: Math.ceil(Math.log2(N)) * (m.link.alpha + FRAME_HEADER_BYTES / streamRate(m)), bytes: 0 };
}

/**
 * Shared-memory allreduce of n bytes over L threads. Registered buffers (what the strategies and
 * a model-parallel section register: the model's flat buffers, activation buffers) are reduced in
 * place: a rank reads its slice from the L − 1 others and writes it to all L (collectives.ts);
 * others go through the staging area: n copied in, the slice reduced from every staging, n copied
 * out. (Checked against the bytes a 2-device run reports: test/simulate/cost-model.test.ts.)
 */
export function shmAllreduce(n: number, L: number, s: ShmModel, registered = true): CollectiveCost {
  if (L <= 1 || n <= 0) return ZERO;
  const slice = n / L;
  const bytes = registered ? slice * (2 * L - 1) : n + slice * (L + 1) + n;
  return { seconds: 2 * s.alpha + (L * bytes) / s.beta, bytes };
}

/** Shared-memory reduce-scatter of n bytes over L threads (this rank's slice only). */
export function shmReduceScatter(n: number, L: number, s: ShmModel, registered = true): CollectiveCost {
  if (L <= 1 || n <= 0) return ZERO;
  const slice = n / L;
  const bytes = registered ? slice * L : n + slice * (L + 1) + slice;
  return { seconds: s.alpha + (L * bytes) / s.beta, bytes };
}

/** Shared-memory allgather of n bytes over L threads: every other rank's slice read and written. */
export function shmAllgather(n: number, L: number, s: ShmModel, registered = true): CollectiveCost {
  if (L <= 1 || n <= 0) return ZERO;
  const bytes = registered ? (2 * n * (L - 1)) / L : 2 * n;
  return { seconds: 2 * s.alpha + (L * bytes) / s.beta, bytes };
}

/** Where the ranks of a collective sit: `perHost` threads in each of `hosts` processes. */
export interface Placement {
  hosts: number;
  perHost: number;
}

/** Both transports: TCP between hosts, shared memory within one. */
export interface Network {
  tcp: TcpModel;
  shm: ShmModel;
}

function add(...cs: CollectiveCost[]): CollectiveCost {
  return { seconds: cs.reduce((t, c) => t + c.seconds, 0), bytes: cs.reduce((b, c) => b + c.bytes, 0) };
}

/**
 * Allreduce over the job's devices as the runtime wires it: shm alone on one host, the TCP ring
 * alone with one device per process, else the hierarchical two levels (L rings of n/L bytes in
 * parallel on each host's link).
 */
export function allreduce(n: number, p: Placement, net: Network, registered = true): CollectiveCost {
  const { hosts: P, perHost: L } = p;
  if (P <= 1) return shmAllreduce(n, L, net.shm, registered);
  if (L <= 1) return ringAllreduce(n, P, net.tcp);
  const parts = hierarchicalParts(n, p, net, registered);
  return add(parts.scatter, parts.cross, parts.gather);
}

/**
 * The hierarchical allreduce's three parts (several devices per host on several hosts): the
 * reduce-scatter inside the host, the ring of each thread's slice across hosts, the allgather
 * inside the host (comm/hierarchical.ts).
 */
export function hierarchicalParts(
  n: number,
  p: Placement,
  net: Network,
  registered = true,
): { scatter: CollectiveCost; cross: CollectiveCost; gather: CollectiveCost } {
  const slice = Math.ceil(n / 4 / p.perHost) * 4;
  return {
    scatter: shmReduceScatter(n, p.perHost, net.shm, registered),
    cross: ringAllreduce(slice, p.hosts, net.tcp, p.perHost),
    gather: shmAllgather(n, p.perHost, net.shm, registered),
  };
}

/**
 * Reduce-scatter over the job's devices: the transport's own on one level; the hierarchical
 * communicator has no true two-level one and runs a whole allreduce (hierarchical.ts).
 */
export function reduceScatter(n: number, p: Placement, net: Network, registered = true): CollectiveCost {
  if (p.hosts <= 1) return shmReduceScatter(n, p.perHost, net.shm, registered);
  if (p.perHost <= 1) return ringHalf(n, p.hosts, net.tcp);
  return allreduce(n, p, net, registered);
}

/** Allgather over the job's devices; hierarchical: an allreduce of a buffer zero outside each slice. */
export function allgather(n: number, p: Placement, net: Network, registered = true): CollectiveCost {
  if (p.hosts <= 1) return shmAllgather(n, p.perHost, net.shm, registered);
  if (p.perHost <= 1) return ringHalf(n, p.hosts, net.tcp);
  return allreduce(n, p, net, registered);
}
