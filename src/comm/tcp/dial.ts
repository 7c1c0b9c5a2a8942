/**
 * Dialling a rank that may not be listening yet (the master, or a peer's data port): retries
 * refused or unreachable attempts with backoff until a deadline. The socket is read with
 * `onread` into a PullReader, so a data link's payloads can be read straight into slots.
 */
import net from 'node:net';
import { CommTimeoutError, RendezvousError } from '../errors.ts';
import { hostPort, PullReader } from './link.ts';

const RETRYABLE = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'EAI_AGAIN',
  'ENOTFOUND',
  'EPIPE',
  'ECONNABORTED',
]);

/**
 * Connects to `host:port` within `deadline`, retrying refused/unreachable attempts with backoff
 * (the peer may not be listening yet). Throws CommTimeoutError naming `who` and the address, or
 * what `stop` returns as soon as it returns something (the job failed meanwhile: stop retrying).
 * `startedAt`: when the attempt that connected began (Date.now()), the earliest the peer can have
 * accepted it — its handshake deadline runs from there, even while this thread is busy.
 */
export async function dialWithRetry(
  host: string,
  port: number,
  deadline: number,
  timeoutMs: number,
  who: string,
  me: string,
  rank: number,
  stop: () => Error | undefined = () => undefined,
): Promise<{ socket: net.Socket; reader: PullReader; startedAt: number }> {
  let delay = 50;
  let lastError = 'no attempt';
  for (;;) {
    const stopped = stop();
    if (stopped) throw stopped;
    const remaining = deadline - Date.now();
    if (remaining <= 0) {
      throw new CommTimeoutError(
        `${me} could not connect to ${who} at ${hostPort(host, port)} within ${timeoutMs} ms (last error: ${lastError})` +
          (rank === 0
            ? ': is rank 0 running, and do MASTER_ADDR/MASTER_PORT point at it?'
            : ': is that process still running, and is the address reachable from here?'),
        [rank],
      );
    }
    try {
      const startedAt = Date.now();
      return await new Promise<{ socket: net.Socket; reader: PullReader; startedAt: number }>((resolve, reject) => {
        const reader = new PullReader();
        const socket = net.connect({ host, port, onread: reader.onread });
        const t = setTimeout(
          () => {
            socket.destroy();
            reject(Object.assign(new Error('connect timed out'), { code: 'ETIMEDOUT' }));
          },
          Math.min(remaining, 5000),
        );
        socket.once('connect', () => {
          clearTimeout(t);
          socket.removeAllListeners('error');
          resolve({ socket, reader, startedAt });
        });
        socket.once('error', (err) => {
          clearTimeout(t);
          socket.destroy();
          reject(err);
        });
      });
    } catch (err) {
      const e = err as NodeJS.ErrnoException;
      lastError = e.code ?? e.message;
      if (e.code && !RETRYABLE.has(e.code)) {
        throw new RendezvousError(`${me} cannot connect to ${who} at ${hostPort(host, port)}: ${lastError}`);
      }
      await new Promise((r) => setTimeout(r, Math.min(delay, Math.max(0, deadline - Date.now()))));
      delay = Math.min(delay * 2, 500);
    }
  }
}
