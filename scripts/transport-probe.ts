/**
 * Measures a link as paratrain's own TCP transport sees it (what the simulator's α and β stand
 * for), between two ranks of a TcpCommunicator — on an emulated link (scripts/emulated-network.ts
 * runs rank 0 in host 0's namespace, rank 1 in host 1's) or over loopback:
 *
 *   node --import tsx scripts/transport-probe.ts RANK MASTER_ADDR PORT BYTES     (PARATRAIN_SECRET set)
 *
 * α: half the median round trip of a one-float send answered by a one-float send — the link's
 * latency plus the transport's own cost per message (framing, hashing, the event loop), which a
 * collective pays at every step; β: BYTES sent one way as one message (frames of 1 MiB, as
 * pulls and pushes go), the time less α, the median of three after a warm-up; β both ways: BYTES sent by each rank to the other at once (a ring of
 * two, a pull crossing a push). Rank 1 prints one JSON line. Bounded: 60 s.
 */
import { TcpCommunicator } from '../src/comm/tcp/index.ts';

const [rankText, master, portText, bytesText] = process.argv.slice(2);
const rank = Number(rankText),
  bytes = Math.max(4, Number(bytesText) & ~3);
if (!(rank === 0 || rank === 1) || !master || !(Number(portText) > 0) || !(bytes > 0)) {
  process.stderr.write('usage: transport-probe.ts RANK(0|1) MASTER_ADDR PORT BYTES\n');
  process.exit(2);
}
setTimeout(() => {
  process.stderr.write('transport-probe: timed out after 60 s\n');
  process.exit(1);
}, 60_000).unref();

const comm = await TcpCommunicator.connect({
  rank,
  worldSize: 2,
  masterAddr: master,
  masterPort: Number(portText),
  listenHost: '0.0.0.0',
  secret: process.env.PARATRAIN_SECRET ?? 'transport-probe-secret-0123456789',
  timeoutMs: 30_000,
});
const peer = 1 - rank,
  one = new Float32Array(1),
  big = new Float32Array(bytes / 4),
  back = new Float32Array(bytes / 4);
const rtts: number[] = [];
for (let i = 0; i < 60; i++) {
  const t0 = performance.now();
  if (rank === 1) {
    await comm.send(one, peer, 1);
    await comm.recv(one, peer, 1);
  } else {
    await comm.recv(one, peer, 1);
    await comm.send(one, peer, 1);
  }
  if (i >= 10) rtts.push(performance.now() - t0);
}
rtts.sort((a, b) => a - b);
const alpha = rtts[rtts.length >> 1]! / 2 / 1000;
/** seconds until rank 1 has the message (rank 0 sends after rank 1 asks: both clocks are rank 1's) */
const oneWay = async (): Promise<number> => {
  const t0 = performance.now();
  if (rank === 1) {
    await comm.send(one, peer, 2);
    await comm.recv(big, peer, 3);
  } else {
    await comm.recv(one, peer, 2);
    await comm.send(big, peer, 3);
  }
  return (performance.now() - t0) / 1000 - 2 * alpha;
};
const bothWays = async (): Promise<number> => {
  await comm.barrier();
  const t0 = performance.now();
  await Promise.all([comm.send(big, peer, 4), comm.recv(back, peer, 4)]);
  await comm.barrier();
  return (performance.now() - t0) / 1000 - 2 * alpha;
};
await oneWay();
const median3 = (xs: number[]) => xs.sort((a, b) => a - b)[1]!;
const one1 = median3([await oneWay(), await oneWay(), await oneWay()]);
const both = median3([await bothWays(), await bothWays(), await bothWays()]);
if (rank === 1)
  process.stdout.write(
    `${JSON.stringify({ alpha, rttMs: 2 * alpha * 1000, bytes, beta: bytes / one1, betaBoth: bytes / both })}\n`,
  );
await comm.close();
process.exit(0);
