/** A non-master rank's side of the rendezvous (rendezvous.ts): register with rank 0, then wait for the world table. */
import { CommTimeoutError, RendezvousError } from '../errors.ts';
import { authenticateAsDialer } from './auth.ts';
import { FrameType, PRE_AUTH_MAX_FRAME, parseJson } from './frame.ts';
import { dialWithRetry } from './dial.ts';
import { hostPort, Link } from './link.ts';
import type { TcpLog } from './log.ts';
import {
  errorFromRefusal,
  HANDSHAKE_TYPES,
  parseTable,
  TABLE_TYPES,
  type Registration,
  type WorldTable,
} from './rendezvous.ts';

export interface RegisterOptions {
  masterAddr: string;
  masterPort: number;
  rank: number;
  key: Buffer;
  deadline: number;
  timeoutMs: number;
  log: TcpLog;
  /** called once connected to the master, with the local address of that connection: start the data listener, return the registration */
  listen(localAddress: string): Promise<Registration>;
}

/** A non-master rank's side of the rendezvous: resolves with the world table. */
export async function registerWithMaster(o: RegisterOptions): Promise<WorldTable> {
  const masterDesc = `the master (rank 0) at ${hostPort(o.masterAddr, o.masterPort)}`;
  const me = `rank ${o.rank}`;
  for (;;) {
    const { socket, reader } = await dialWithRetry(
      o.masterAddr,
      o.masterPort,
      o.deadline,
      o.timeoutMs,
      'the master (rank 0)',
      me,
      0,
    );
    const link = new Link(socket, PRE_AUTH_MAX_FRAME, HANDSHAKE_TYPES, reader);
    try {
      await authenticateAsDialer(link, {
        key: o.key,
        purpose: 'rendezvous',
        myRank: o.rank,
        peerRank: 0,
        job: '',
        peerDesc: masterDesc,
        deadlineMs: Math.max(1, Math.min(o.deadline - Date.now(), 10_000)),
      });
    } catch (err) {
      link.destroy();
      // a connection reset during the handshake (master restarting) is retried; a refusal is not
      if ((err as Error).name === 'AuthenticationError' || (err as Error).name === 'RendezvousError') throw err;
      if (Date.now() >= o.deadline) {
        throw new CommTimeoutError(
          `${me}: the handshake with ${masterDesc} did not complete within ${o.timeoutMs} ms (${(err as Error).message})`,
          [0],
        );
      }
      o.log('debug', `handshake with ${masterDesc} failed (${(err as Error).message}); retrying`);
      await new Promise((r) => setTimeout(r, 200));
      continue;
    }
    try {
      const reg = await o.listen(socket.localAddress ?? '127.0.0.1');
      link.raiseLimits(64 * 1024 * 1024, TABLE_TYPES);
      void link.sendJson(FrameType.Register, reg);
      const remaining = Math.max(1, o.deadline - Date.now());
      let timer: NodeJS.Timeout | undefined;
      const f = await Promise.race([
        link.next(),
        new Promise<never>((_, reject) => {
          timer = setTimeout(
            () =>
              reject(
                new CommTimeoutError(
                  `${me} registered with ${masterDesc}, but the world did not form within ` +
                    `${o.timeoutMs} ms: the master was still waiting for other ranks (its log names them)`,
                  [],
                ),
              ),
            remaining,
          );
        }),
      ])
        .catch((err: Error) => {
          if (err instanceof CommTimeoutError) throw err;
          throw new RendezvousError(
            `${masterDesc} closed the connection during the rendezvous (${err.message}): did rank 0 fail? Its log says why`,
          );
        })
        .finally(() => clearTimeout(timer));
      const body = parseJson(f);
      if (f.type === FrameType.Refuse) throw errorFromRefusal(body, masterDesc);
      return parseTable(body, masterDesc);
    } finally {
      link.close();
    }
  }
}
