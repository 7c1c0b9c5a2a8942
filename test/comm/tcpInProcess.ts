/**
 * A TCP world of `size` ranks in this process, on loopback: rank 0 listens on a free port, the
 * others connect to it once it is known. For tests whose ranks share one event loop.
 */
import { TcpCommunicator } from '../../src/comm/tcp/index.ts';

export async function tcpWorld(
  size: number,
  secret = 'in-process-test-secret',
  timeoutMs = 20_000,
): Promise<TcpCommunicator[]> {
  let port!: (p: number) => void;
  const known = new Promise<number>((resolve) => {
    port = resolve;
  });
  const first = TcpCommunicator.connect({
    rank: 0,
    worldSize: size,
    masterPort: 0,
    secret,
    timeoutMs,
    onMasterListening: (a) => port(a.port),
  });
  const masterPort = await known;
  const rest = Array.from({ length: size - 1 }, (_, i) =>
    TcpCommunicator.connect({ rank: i + 1, worldSize: size, masterPort, secret, timeoutMs }),
  );
  return Promise.all([first, ...rest]);
}
