/**
 * The TCP transport: the same Communicator as `shm`, between processes on one or many hosts.
 *
 *   const comm = await TcpCommunicator.connect({
 *     rank, worldSize, masterAddr: '10.0.0.1', masterPort: 29500,   // or TcpCommunicator.fromEnv({ … })
 *     secret: process.env.PARATRAIN_SECRET,     // default: PARATRAIN_SECRET / PARATRAIN_SECRET_FILE
 *     configHash,                               // ranks with another model configuration are refused
 *     timeoutMs: 60_000,                        // rendezvous/connect deadline; recvTimeoutMs: per wait
 *     maxFrameBytes: 8 << 20,                   // largest frame accepted; chunkBytes: pipelining
 *     log: (level, msg) => …,                   // dropped connections, failures
 *   });
 *   await comm.allreduce(grads, 'mean');        // any Float32Array, in place
 *   const { commMs, waitMs, bytes } = comm.takeStats();
 *   await comm.close();                          // tells peers this rank finished (not died)
 *
 * World formation (rendezvous.ts): rank 0 listens on masterAddr:masterPort and every rank on a
 * data port (listenPort, default any free port) on loopback, or — when the master is on another
 * host — on the interface that reaches the master (listenHost overrides; see TcpConnectOptions).
 * Each rank connects to the master, authenticates, registers its data address, config hash and
 * frame limit; the master checks them (same world size and config hash, no duplicate rank) and
 * sends everyone the table, or refuses everyone with the reason (ConfigMismatchError names the
 * differing rank). Then each rank dials its left ring neighbour (other peers on first use).
 * Every wait has a deadline (timeoutMs for forming, recvTimeoutMs per wait in a call) whose
 * CommTimeoutError names the rank it waited for and its host:port.
 *
 * Collectives (tcpCommunicator.ts): chunked, pipelined ring reduce-scatter + allgather
 * (2(N−1)/N of the buffer sent per rank); each element is summed once, in ring order, by one
 * rank, so every rank gets bit-identical results. Reduction and checksums run in place in the
 * optional native addon (nativeDataPath.ts, built by `npm ci` where a C compiler is), else in wasm
 * SIMD (kernel.ts); with the addon, frames that are only stored (allgather, broadcast) are read
 * straight into the caller's buffer (landing.ts). Any failure inside a call aborts the job on every rank (PeerFailedError naming
 * the origin) instead of leaving peers to time out. takeStats(): commMs (time in calls), waitMs
 * (time blocked before the first data of each call arrived: the skew to the slowest upstream
 * rank, plus one chunk's latency), bytes (payload sent + received).
 *
 * Security: every connection (rendezvous and data) is authenticated both ways by HMAC-SHA256
 * challenge–response on the shared secret (auth.ts). A world of more than one rank refuses to
 * start without a secret unless `allowInsecure` is set (secret.ts). Before authentication a
 * connection may send only small handshake frames and must finish within 10 s; malformed,
 * oversized, unauthenticated or foreign traffic drops that connection with one warning line and
 * never disturbs the job (corrupt frames from an authenticated peer abort the job: a stream
 * cannot be resynchronised). Frames (frame.ts) carry a length, type, sequence number, a payload
 * checksum (CRC32 for control frames, the SIMD hash "ptr32" for data) and a header CRC32, and
 * are bounded by maxFrameBytes (each rank's limit is exchanged at rendezvous; senders use the
 * smallest). The secret is never sent; a world of one rank opens no socket and needs none.
 *
 * Not here (the runtime's): launching processes, hierarchical (shm within a host, tcp across)
 * allreduce, a TCP parameter server.
 */
export { TcpCommunicator, type TcpConnectOptions } from './tcpCommunicator.ts';
export type { RankAddress, WorldTable } from './rendezvous.ts';
export type { TcpLog, TcpLogLevel } from './log.ts';
export { FrameError, MAGIC, HEADER_BYTES, FrameType } from './frame.ts';
export { PeerFailedError, CommTimeoutError, CollectiveMismatchError, AuthenticationError, ConfigMismatchError, RendezvousError } from '../errors.ts';
export { rendezvousFromEnv, expandNodeList, RendezvousEnvError, type RendezvousInfo, type RendezvousSource } from '../rendezvous.ts';
