/** This rank's part of the rendezvous: its data listener, its registration, and the world table it gets back. */
import net from 'node:net';
import os from 'node:os';
import { RendezvousError } from '../errors.ts';
import { hostPort } from './link.ts';
import type { TcpLog } from './log.ts';
import type { ResolvedOptions } from './options.ts';
import type { Registration, WorldTable } from './rendezvous.ts';
import { RendezvousMaster } from './rendezvousMaster.ts';
import { registerWithMaster } from './rendezvousRank.ts';

const isWildcard = (h: string) => h === '0.0.0.0' || h === '::' || h === '';

/** A rank's data listener and the address it advertises to its peers. */
export interface DataListener {
  server: net.Server;
  host: string;
  port: number;
}

/** Opens the data listener on `bind` (connections go to `onAccept`); it advertises advertiseHost, else `advertise`. */
export async function openDataListener(
  o: ResolvedOptions,
  bind: string,
  advertise: string,
  onAccept: (socket: net.Socket) => void,
  log: TcpLog,
): Promise<DataListener> {
  const server = net.createServer(onAccept);
  server.on('error', (err) => log('warn', `data listener: ${err.message}`));
  await new Promise<void>((resolve, reject) => {
    const onError = (err: NodeJS.ErrnoException) =>
      reject(
        new RendezvousError(
          `rank ${o.rank} cannot listen on ${hostPort(bind, o.listenPort)}: ${err.code ?? err.message}` +
            (err.code === 'EADDRNOTAVAIL'
              ? ' — that address does not belong to this host (check listenHost / MASTER_ADDR)'
              : ''),
        ),
      );
    server.once('error', onError);
    server.listen(o.listenPort, bind, () => {
      server.off('error', onError);
      resolve();
    });
  });
  const port = (server.address() as net.AddressInfo).port;
  return { server, host: o.advertiseHost ?? advertise, port };
}

/** What this rank registers with rank 0: its data address, identity, config hash, limits and agreements. */
export function registrationOf(o: ResolvedOptions, at: { host: string; port: number }): Registration {
  return {
    rank: o.rank,
    worldSize: o.worldSize,
    host: at.host,
    port: at.port,
    hostname: os.hostname(),
    pid: process.pid,
    configHash: o.configHash,
    maxFrameBytes: o.maxFrameBytes,
    ...(o.agreements.length ? { agreements: [...o.agreements] } : {}),
  };
}

/**
 * The rendezvous, by `deadline`: rank 0 runs the master (rendezvousMaster.ts), every other rank
 * registers with it (rendezvousRank.ts). `listen(bind, advertise)` opens this rank's data listener
 * once the address to bind is known and returns its registration. A failure on rank 0 refuses the
 * whole job.
 */
export async function joinWorld(
  o: ResolvedOptions,
  key: Buffer,
  log: TcpLog,
  deadline: number,
  listen: (bind: string, advertise: string) => Promise<Registration>,
): Promise<WorldTable> {
  if (o.rank !== 0) {
    return registerWithMaster({
      masterAddr: o.masterAddr,
      masterPort: o.masterPort,
      rank: o.rank,
      key,
      deadline,
      timeoutMs: o.timeoutMs,
      log,
      listen: (local) => {
        const bind = o.listenHost ?? local;
        return listen(bind, isWildcard(bind) ? local : bind);
      },
    });
  }
  const bind = o.listenHost ?? o.masterAddr;
  const self = await listen(bind, isWildcard(bind) ? o.masterAddr : bind);
  const master = new RendezvousMaster({
    host: bind,
    port: o.masterPort,
    key,
    self,
    deadline,
    timeoutMs: o.timeoutMs,
    hosts: o.hosts,
    rankNames: o.rankNames,
    log,
  });
  try {
    const addr = await master.listen();
    o.onMasterListening?.(addr);
    return await master.table;
  } catch (err) {
    master.close(`rank 0 failed: ${(err as Error).message}`);
    throw err;
  }
}
