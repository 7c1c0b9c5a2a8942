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
 *   const { commMs, idleMs, bytes } = comm.takeStats();
 *   await comm.close();                          // tells peers this rank finished (not died)
 *
 * The pieces: tcpCommunicator.ts (the facade: argument checks; an error inside a call fails the
 * job), options.ts, joinWorld.ts and peerLinks.ts (world formation), routing.ts (which queue a
 * frame lands in), failure.ts (aborts, timeouts, blame), ring.ts (reduce-scatter, allgather,
 * allreduce), chain.ts (broadcast, barrier), pointToPoint.ts (send/recv), callFrames.ts (what the
 * calls share); below them link.ts, frame.ts and frameDecoder.ts (the wire), auth.ts and
 * secret.ts, rendezvous.ts (with rendezvousMaster.ts and rendezvousRank.ts) and dial.ts,
 * dataEngines.ts over dataPath.ts / nativeDataPath.ts / nativeRing.ts (hashing and reducing
 * payloads), landing.ts.
 *
 * World formation (rendezvous*.ts, joinWorld.ts, peerLinks.ts): rank 0 listens on
 * masterAddr:masterPort and every rank on a data port (listenPort, default any free port) on
 * loopback, or — when the master is on another host — on the interface that reaches the master
 * (listenHost overrides; see TcpConnectOptions). Each rank connects to the master, authenticates, registers its data
 * address, config hash, frame limit and `agreements` (e.g. its data's fingerprint); the master
 * checks them (same world size, config hash and agreements, no duplicate rank) and sends everyone
 * the table, or refuses everyone with the reason (ConfigMismatchError names the differing rank and
 * field). Connections that have not proved the secret, to the rendezvous port or a data port, pass
 * one gate (strangers.ts: per-address limits, a 2 s deadline, the oldest dropped to make room), so
 * a flood cannot shut a rank out. Then each rank dials its left ring neighbour
 * to receive from it (other pairs: the sender dials on first use), so each direction of a pair
 * has exactly one ordered stream and no two ranks race to open one. Every wait has a deadline
 * (timeoutMs for forming, recvTimeoutMs per wait in a call) whose CommTimeoutError names the
 * rank it waited for and its host:port.
 *
 * Collectives (N ranks, n floats, segment k = ownedSlice(n, N, k), right = rank+1, left = rank−1):
 *   reduce-scatter ring: step s = 0…N−2 sends segment rank−1−s to the right and adds the segment
 *     rank−2−s coming from the left into the buffer; after the last step this rank holds the
 *     reduced segment `rank`, summed along the ring (k+1, k+2, …, k for segment k) — one order
 *     per element, computed once, so every rank ends with bit-identical values.
 *   allgather ring: step s sends segment rank−s, stores segment rank−1−s from the left.
 *   allreduce = reduce-scatter then allgather ('mean' divides a segment once, by its owner, before
 *     it goes round): 2(N−1)/N · n floats sent per rank, bandwidth-optimal.
 *   broadcast: a pipelined chain root → root+1 → … → root−1. barrier: dissemination, ⌈log2 N⌉
 *     rounds (rank+2^k).
 *   Pipelining: segments travel as frames of at most `chunkBytes` (the native ring: an eighth of
 *     a segment where that is smaller); each frame received is reduced and forwarded at once, so
 *     sending, receiving and reducing overlap (sends are written from the caller's buffer without
 *     copying and flushed before a call returns). The reduction adds the received slot into the
 *     caller's buffer; the forwarded frame's checksum is computed in the same pass
 *     (allgather/broadcast forwards reuse the received one). Reduction and checksums run in place
 *     in the optional native addon (nativeDataPath.ts, built by `npm ci` where a C compiler is),
 *     else in wasm SIMD (dataPath.ts); with the addon, frames that are only stored (allgather,
 *     broadcast) are read straight into the caller's buffer (landing.ts). A landed frame can only
 *     overwrite floats this rank has already sent: the value it carries was computed downstream
 *     from them. After a failed call the buffer's contents are unspecified.
 *   Native ring (nativeRing.ts, native/tcp/ring.c; where the addon is built): the ring's steps
 *     are a list that the C loop or ring.ts's loop can advance. Whenever a call is alone and at a
 *     clean moment (our writes flushed, nothing of it queued or half-read) the C loop takes over
 *     the two ring sockets (what the left neighbour sends before this rank enters the call waits
 *     unread at its first header for it, see FrameRouter.holdsFrame) — reading, hashing, reducing
 *     and forwarding frames with no event loop in between, which keeps up when processes
 *     outnumber cores — and hands back at a frame boundary on anything else (another call's
 *     frame, the end of a stream), after a slice without data, or once one of this rank's other
 *     connections has something to read, so control frames, timers and other links are never
 *     starved for longer. A peer's Abort ends it at once, wherever it waits (on the ring's left
 *     link, or looked at without reading on another connection, where it arrives ahead of the data
 *     still queued on the ring): the sends it had queued are dropped but for the rest of a frame
 *     half written, which Node finishes, so this rank's own Abort follows in sequence. The frames on
 *     the wire are the same either way.
 *
 * Failure (failure.ts): each data frame carries the collective's sequence number, kind, reduce
 * op, root and length, so a rank called differently from its neighbour fails with
 * CollectiveMismatchError naming both calls. Any error inside a call (mismatch, timeout, lost
 * peer) aborts the job: Abort frames go to every connected peer, which forward them, so every
 * rank's pending and later calls throw PeerFailedError naming the origin instead of waiting for
 * their timeouts.
 * Except in a star world (onPeerLost given: the parameter server's, rank 0 the hub): there a lost
 * rank other than 0 fails only the calls that wait for it or send to it (lostPeers.ts), so the
 * server serves the devices that remain. A timeout's Abort says whom it blames; a blamed rank that was itself stuck
 * waiting on another rank adds that rank to the reason, so a stall is traced to the stalled rank,
 * whichever neighbour's timer fired first.
 *
 * takeStats(): commMs (time in calls), idleMs (time blocked before the first data of each call
 * arrived: the skew to the slowest upstream rank, plus one chunk's latency), bytes (payload sent
 * + received).
 *
 * Security: every connection (rendezvous and data) is authenticated both ways by HMAC-SHA256
 * challenge–response on the shared secret (auth.ts). A world of more than one rank refuses to
 * start without a secret unless `allowInsecure` is set (secret.ts). Before authentication a
 * connection may send only small handshake frames and must prove the secret within 2 s; malformed,
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
export type { Agreement } from './agreement.ts';
export type { TcpLog, TcpLogLevel } from './log.ts';
export { FrameError, MAGIC, HEADER_BYTES, FrameType } from './frame.ts';
export {
  PeerFailedError,
  CommTimeoutError,
  CollectiveMismatchError,
  AuthenticationError,
  ConfigMismatchError,
  RendezvousError,
} from '../errors.ts';
export {
  rendezvousFromEnv,
  expandNodeList,
  RendezvousEnvError,
  type RendezvousInfo,
  type RendezvousSource,
} from '../rendezvous.ts';
