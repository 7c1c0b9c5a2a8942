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
 * World formation: rank 0 listens on masterAddr:masterPort (rendezvous) and every rank on a data
 * port (listenPort, default any free port) on loopback, or — when the master is on another host —
 * on the interface that reaches the master (listenHost overrides; see TcpConnectOptions). Each
 * rank connects to the master, authenticates, registers its data address, config hash and frame
 * limit; the master checks them (same world size and config hash, no duplicate rank) and sends
 * everyone the table, or refuses everyone with the reason. Then each rank dials its ring
 * neighbour (other peers on first use). Every wait has a deadline whose error names the rank it
 * was waiting for and its host.
 *
 * Security: every connection (rendezvous and data) is authenticated both ways by HMAC-SHA256
 * challenge–response on the shared secret (auth.ts). A world of more than one rank refuses to
 * start without a secret unless `allowInsecure` is set (secret.ts). Before authentication a
 * connection may send only small handshake frames and must finish within 10 s; malformed,
 * oversized, unauthenticated or foreign traffic drops that connection with one warning line and
 * never disturbs the job. Frames (frame.ts) carry a length, type, sequence number, CRC32 of the
 * payload and of the header, and are bounded by maxFrameBytes.
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
