/**
 * Forming a TCP world: every rank registers with the master (rank 0), which checks the job is
 * consistent and answers with the table of every rank's data address.
 *
 *   rank k → master   (authenticated connection, purpose "rendezvous")
 *                     Register { rank, worldSize, host, port, hostname, pid, configHash, maxFrameBytes, agreements? }
 *   master → rank k   Table { job, peers: [{ rank, host, port, hostname, pid }], maxFrameBytes }
 *                  or Refuse { kind: 'config' | 'timeout' | 'rendezvous', message, rank?, missing? }
 *
 * The master refuses the whole job — every registered rank and any that registers later, until
 * its deadline — as soon as it sees: a config hash different from its own (ConfigMismatchError
 * naming the rank), a different world size, a rank out of range, or two processes claiming one
 * rank (RendezvousError); or when its deadline passes with ranks missing (CommTimeoutError naming
 * them, and their expected hosts when `hosts` was given). Every rank thus fails with the same
 * clear message instead of hanging. `job` is a fresh random id: data connections must present it.
 * Registered `agreements` (agreement.ts: e.g. the data's fingerprint) that differ from rank 0's are
 * refused like a different config hash. Strangers (connections that have not proved the secret) are
 * admitted by a StrangerGate (strangers.ts): per-address limits, a 2 s deadline, the oldest dropped
 * to make room, so they cannot shut out a real rank; a timeout names the flood it dropped meanwhile.
 */
import net from 'node:net';
import { randomBytes } from 'node:crypto';
import { AuthenticationError, CommTimeoutError, ConfigMismatchError, RendezvousError } from '../errors.ts';
import { authenticateAsAcceptor, authenticateAsDialer } from './auth.ts';
import { FrameError, FrameType, PRE_AUTH_MAX_FRAME, parseJson, type Frame } from './frame.ts';
import { dialWithRetry } from './dial.ts';
import { hostPort, Link } from './link.ts';
import type { TcpLog } from './log.ts';
import { disagreement, parseAgreements, type Agreement } from './agreement.ts';
import { AUTH_DEADLINE_MS, remoteAddress, StrangerGate, STRANGERS_PER_ADDRESS, STRANGERS_TOTAL } from './strangers.ts';

export interface RankAddress {
  rank: number;
  host: string;
  port: number;
  hostname: string;
  pid: number;
}

export interface Registration extends RankAddress {
  worldSize: number;
  configHash: string;
  maxFrameBytes: number;
  /** what else must agree with rank 0 (agreement.ts) */
  agreements?: Agreement[];
}

export interface WorldTable {
  job: string;
  peers: RankAddress[];
  /** the smallest maxFrameBytes of any rank: what every sender may use */
  maxFrameBytes: number;
}

const HANDSHAKE_TYPES = new Set<number>([
  FrameType.Hello,
  FrameType.Challenge,
  FrameType.Proof,
  FrameType.Welcome,
  FrameType.Refuse,
]);
const REGISTER_TYPES = new Set<number>([FrameType.Register, FrameType.Refuse]);
const TABLE_TYPES = new Set<number>([FrameType.Table, FrameType.Refuse]);

const isStr = (v: unknown, max = 1024): v is string => typeof v === 'string' && v.length <= max;
const isInt = (v: unknown, lo: number, hi: number): v is number =>
  typeof v === 'number' && Number.isInteger(v) && v >= lo && v <= hi;

export function parseRegistration(f: Frame): Registration {
  const b = parseJson(f);
  if (
    !isInt(b.rank, 0, 65535) ||
    !isInt(b.worldSize, 1, 65536) ||
    !isStr(b.host, 255) ||
    !isInt(b.port, 1, 65535) ||
    !isStr(b.hostname, 255) ||
    !isInt(b.pid, 0, 2 ** 31) ||
    !isStr(b.configHash) ||
    !isInt(b.maxFrameBytes, 1, 2 ** 31)
  ) {
    throw new FrameError('malformed registration');
  }
  return {
    rank: b.rank,
    worldSize: b.worldSize,
    host: b.host,
    port: b.port,
    hostname: b.hostname,
    pid: b.pid,
    configHash: b.configHash,
    maxFrameBytes: b.maxFrameBytes,
    agreements: parseAgreements(b.agreements),
  };
}

function describeReg(r: RankAddress): string {
  return `rank ${r.rank} (${r.hostname}, pid ${r.pid})`;
}

function shortHash(h: string): string {
  return h === '' ? '(none)' : h.length > 24 ? `${h.slice(0, 24)}…` : h;
}

export function errorFromRefusal(body: Record<string, unknown>, masterDesc: string): Error {
  const message = isStr(body.message, 4000) ? body.message : `${masterDesc} refused this rank without a reason`;
  if (body.kind === 'config' && isInt(body.rank, 0, 65535)) return new ConfigMismatchError(message, body.rank);
  if (body.kind === 'timeout') {
    const missing = Array.isArray(body.missing) ? body.missing.filter((m): m is number => isInt(m, 0, 65535)) : [];
    return new CommTimeoutError(message, missing);
  }
  return new RendezvousError(message);
}

function refusalBody(err: Error): Record<string, unknown> {
  if (err instanceof ConfigMismatchError) return { kind: 'config', message: err.message, rank: err.rank };
  if (err instanceof CommTimeoutError) return { kind: 'timeout', message: err.message, missing: err.missing };
  return { kind: 'rendezvous', message: err.message };
}

export interface MasterOptions {
  /** bind address and port of the rendezvous server (port 0: any free port) */
  host: string;
  port: number;
  key: Buffer;
  /** rank 0's own registration */
  self: Registration;
  /** absolute time (Date.now()) by which every rank must have registered */
  deadline: number;
  timeoutMs: number;
  hosts?: readonly string[];
  /** what messages call each rank (default `rank r`) */
  rankNames?: readonly string[];
  log: TcpLog;
}

/** Rank 0's rendezvous server. `table` settles once: the world, or why it cannot form. */
export class RendezvousMaster {
  readonly table: Promise<WorldTable>;
  private resolveTable!: (t: WorldTable) => void;
  private rejectTable!: (e: Error) => void;
  private readonly server: net.Server;
  private readonly regs = new Map<number, { reg: Registration; link: Link }>();
  private readonly strangers: StrangerGate;
  /** claimed rank → address of a connection that failed authentication (for the timeout message) */
  private readonly authFailures = new Map<number, string>();
  private failure: Error | undefined;
  private settled = false;
  private timer: NodeJS.Timeout | undefined;
  private address = '';

  constructor(private readonly o: MasterOptions) {
    this.table = new Promise((resolve, reject) => {
      this.resolveTable = resolve;
      this.rejectTable = reject;
    });
    this.table.catch(() => {});
    // a world's ranks may all register at once from one host: never evict them for each other
    const n = o.self.worldSize;
    this.strangers = new StrangerGate(
      'the rendezvous port',
      o.log,
      Math.max(STRANGERS_PER_ADDRESS, n),
      Math.max(STRANGERS_TOTAL, 2 * n),
    );
    this.server = net.createServer((socket) => this.onConnection(socket));
    this.server.on('error', (err) => this.o.log('warn', `rendezvous server: ${err.message}`));
  }

  /** Starts listening; resolves with the bound address. */
  async listen(): Promise<{ host: string; port: number }> {
    await new Promise<void>((resolve, reject) => {
      const onError = (err: NodeJS.ErrnoException) => {
        reject(
          new RendezvousError(
            `rank 0 cannot listen for the rendezvous on ${hostPort(this.o.host, this.o.port)}: ${err.code ?? err.message}` +
              (err.code === 'EADDRINUSE'
                ? ' — another job (or a previous run still exiting) uses MASTER_PORT; pick another port'
                : '') +
              (err.code === 'EADDRNOTAVAIL'
                ? ' — MASTER_ADDR is not an address of this host; start rank 0 on the host MASTER_ADDR names'
                : ''),
          ),
        );
      };
      this.server.once('error', onError);
      this.server.listen(this.o.port, this.o.host, () => {
        this.server.off('error', onError);
        resolve();
      });
    });
    const a = this.server.address() as net.AddressInfo;
    this.address = hostPort(this.o.host, a.port);
    this.timer = setTimeout(() => this.onDeadline(), Math.max(0, this.o.deadline - Date.now()));
    if (this.o.self.worldSize === 1) this.complete();
    return { host: this.o.host, port: a.port };
  }

  private onConnection(socket: net.Socket): void {
    const link = new Link(socket, PRE_AUTH_MAX_FRAME, HANDSHAKE_TYPES);
    const from = link.remote;
    this.strangers.admit(link, remoteAddress(link));
    void this.handle(link).catch((err: Error) => {
      // a process with the wrong secret is named by the timeout message, not counted among strangers
      const wrongSecret = err instanceof AuthenticationError && err.claimedRank !== undefined;
      if (wrongSecret) this.authFailures.set(err.claimedRank!, from);
      this.strangers.drop(link, err.message, !wrongSecret);
    });
  }

  private name(r: number): string {
    return this.o.rankNames?.[r] ?? `rank ${r}`;
  }

  private async handle(link: Link): Promise<void> {
    const handshakeMs = Math.min(this.o.timeoutMs, 10_000);
    await authenticateAsAcceptor(link, {
      key: this.o.key,
      purpose: 'rendezvous',
      myRank: 0,
      job: '',
      deadlineMs: Math.min(this.o.timeoutMs, AUTH_DEADLINE_MS),
      check: () => undefined,
    });
    this.strangers.settle(link);
    link.raiseLimits(64 * 1024, REGISTER_TYPES);
    const timer = setTimeout(
      () => link.destroy(new FrameError(`no registration within ${handshakeMs} ms`)),
      handshakeMs,
    );
    let f: Frame;
    try {
      f = await link.next();
    } finally {
      clearTimeout(timer);
    }
    if (f.type === FrameType.Refuse) throw new FrameError('peer refused to register');
    this.register(parseRegistration(f), link);
  }

  private register(reg: Registration, link: Link): void {
    if (this.failure || this.settled) {
      const err =
        this.failure ??
        new RendezvousError(
          `the world of ${this.o.self.worldSize} ranks has already formed without ${describeReg(reg)}`,
        );
      link.sendJsonAndClose(FrameType.Refuse, refusalBody(err));
      return;
    }
    const me = this.o.self;
    const W = me.worldSize;
    if (reg.worldSize !== W) {
      this.fail(
        new RendezvousError(
          `${describeReg(reg)} was started with world size ${reg.worldSize}, but rank 0 (${me.hostname}) with ${W}: ` +
            `every process of a job must get the same WORLD_SIZE`,
        ),
        link,
      );
      return;
    }
    if (reg.rank === 0 || reg.rank >= W) {
      this.fail(
        new RendezvousError(
          reg.rank === 0
            ? `two processes were started as rank 0: ${describeReg(reg)} and the master (${me.hostname}, pid ${me.pid}) — every rank needs its own RANK`
            : `${describeReg(reg)} is out of range: the world has ${W} ranks (0…${W - 1})`,
        ),
        link,
      );
      return;
    }
    const dup = this.regs.get(reg.rank);
    if (dup) {
      this.fail(
        new RendezvousError(
          `two processes were started as rank ${reg.rank}: ${describeReg(dup.reg)} and ${describeReg(reg)} — every rank needs its own RANK`,
        ),
        link,
      );
      return;
    }
    if (reg.configHash !== me.configHash) {
      this.fail(
        new ConfigMismatchError(
          `${describeReg(reg)} has a different model configuration from rank 0 (${me.hostname}): ` +
            `config hash ${shortHash(reg.configHash)} vs ${shortHash(me.configHash)} — start every process with the same configuration`,
          reg.rank,
        ),
        link,
      );
      return;
    }
    const differs = disagreement(me.agreements ?? [], reg.agreements ?? [], this.name(0), this.name(reg.rank));
    if (differs) {
      this.fail(new ConfigMismatchError(differs, reg.rank), link);
      return;
    }
    this.regs.set(reg.rank, { reg, link });
    link.onEnd(() => {
      // a registered rank that goes away before the table is sent cannot be part of the world
      if (!this.settled && !this.failure && this.regs.get(reg.rank)?.link === link) {
        this.regs.delete(reg.rank);
        this.o.log(
          'warn',
          `rank ${reg.rank} (${reg.hostname}) disconnected from the rendezvous before the world formed; waiting for it again`,
        );
      }
    });
    this.o.log(
      'debug',
      `rendezvous: ${describeReg(reg)} registered from ${reg.host}:${reg.port} (${this.regs.size + 1}/${W})`,
    );
    if (this.regs.size === W - 1) this.complete();
  }

  private complete(): void {
    const me = this.o.self;
    const all = [me, ...[...this.regs.values()].map((r) => r.reg)].sort((a, b) => a.rank - b.rank);
    const table: WorldTable = {
      job: randomBytes(8).toString('hex'),
      peers: all.map(({ rank, host, port, hostname, pid }) => ({ rank, host, port, hostname, pid })),
      maxFrameBytes: Math.min(...all.map((r) => r.maxFrameBytes)),
    };
    this.settled = true;
    this.logFlood('formed');
    clearTimeout(this.timer);
    for (const { link } of this.regs.values()) link.sendJsonAndClose(FrameType.Table, table);
    this.regs.clear();
    this.closeServer();
    this.resolveTable(table);
  }

  private fail(err: Error, culprit?: Link): void {
    if (this.failure || this.settled) return;
    this.failure = err;
    this.o.log('error', `rendezvous failed: ${err.message}`);
    this.logFlood('failed');
    const body = refusalBody(err);
    const links = [...[...this.regs.values()].map((r) => r.link), ...(culprit ? [culprit] : [])];
    for (const link of links) link.sendJsonAndClose(FrameType.Refuse, body);
    this.regs.clear();
    this.rejectTable(err);
    // keep answering late ranks with the same refusal until the deadline, without keeping the process alive
    this.server.unref();
    clearTimeout(this.timer);
    const linger = setTimeout(() => this.closeServer(), Math.max(0, this.o.deadline - Date.now()));
    linger.unref();
  }

  private onDeadline(): void {
    if (this.settled || this.failure) {
      this.closeServer();
      return;
    }
    const W = this.o.self.worldSize;
    const flood = this.strangers.summary();
    const missing = Array.from({ length: W }, (_, r) => r).filter((r) => r !== 0 && !this.regs.has(r));
    const expected = (r: number) => {
      const auth = this.authFailures.get(r);
      if (auth)
        return `a process claiming rank ${r} connected from ${auth} but failed authentication: its secret differs`;
      return this.o.hosts?.[r] ? `expected on host ${this.o.hosts[r]}` : 'host unknown: it never contacted the master';
    };
    const names =
      missing
        .slice(0, 8)
        .map((r) => `${this.name(r)} (${expected(r)})`)
        .join(', ') + (missing.length > 8 ? `, and ${missing.length - 8} more` : '');
    this.fail(
      new CommTimeoutError(
        `rendezvous timed out after ${this.o.timeoutMs} ms: the master (rank 0 at ${this.address}) never heard from ${names}; ` +
          `${this.regs.size + 1} of ${W} ranks arrived — ` +
          (flood
            ? `meanwhile ${flood} were dropped: something else floods MASTER_PORT (a port scan, ` +
              'another job?): firewall the port or pick another; and '
            : '') +
          'is every rank started, with MASTER_ADDR/MASTER_PORT pointing at rank 0 and the same secret?',
        missing,
      ),
    );
    this.closeServer();
  }

  private closeServer(): void {
    this.server.close();
    this.strangers.closeAll();
  }

  /** One line for the strangers dropped while the world formed (or failed to). */
  private logFlood(outcome: 'formed' | 'failed'): void {
    const flood = this.strangers.summary();
    if (flood) this.o.log('warn', `rendezvous ${outcome} after dropping ${flood} that never proved the secret`);
  }

  /**
   * connect() failed on rank 0: refuse the job (if not already) — after a failure the server
   * lingers, unref'd, answering late ranks with the refusal until the deadline.
   */
  close(reason = 'rank 0 gave up the rendezvous'): void {
    if (!this.settled && !this.failure) this.fail(new RendezvousError(reason));
  }
}

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

export function parseTable(b: Record<string, unknown>, masterDesc: string): WorldTable {
  const bad = () => new RendezvousError(`${masterDesc} sent a malformed world table`);
  if (!isStr(b.job, 64) || !isInt(b.maxFrameBytes, 1, 2 ** 31) || !Array.isArray(b.peers)) throw bad();
  const peers = b.peers.map((p: unknown, i: number) => {
    const q = p as Record<string, unknown>;
    if (
      typeof q !== 'object' ||
      q === null ||
      q.rank !== i ||
      !isStr(q.host, 255) ||
      !isInt(q.port, 1, 65535) ||
      !isStr(q.hostname, 255) ||
      !isInt(q.pid, 0, 2 ** 31)
    )
      throw bad();
    return { rank: i, host: q.host, port: q.port, hostname: q.hostname, pid: q.pid };
  });
  return { job: b.job, peers, maxFrameBytes: b.maxFrameBytes };
}
