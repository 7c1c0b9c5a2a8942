/** Rank 0's side of the rendezvous (rendezvous.ts): it checks each registration, then sends the table or a refusal. */
import net from 'node:net';
import { randomBytes } from 'node:crypto';
import { AuthenticationError, CommTimeoutError, ConfigMismatchError, RendezvousError } from '../errors.ts';
import { authenticateAsAcceptor } from './auth.ts';
import { FrameError, FrameType, PRE_AUTH_MAX_FRAME, type Frame } from './frame.ts';
import { hostPort, Link } from './link.ts';
import type { TcpLog } from './log.ts';
import { disagreement } from './agreement.ts';
import { AUTH_DEADLINE_MS, StrangerGate, STRANGERS_PER_ADDRESS, STRANGERS_TOTAL } from './strangers.ts';
import {
  HANDSHAKE_TYPES,
  parseRegistration,
  refusalBody,
  REGISTER_TYPES,
  type RankAddress,
  type Registration,
  type WorldTable,
} from './rendezvous.ts';

function describeReg(r: RankAddress): string {
  return `rank ${r.rank} (${r.hostname}, pid ${r.pid})`;
}

function shortHash(h: string): string {
  return h === '' ? '(none)' : h.length > 24 ? `${h.slice(0, 24)}…` : h;
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
      Math.min(o.timeoutMs, AUTH_DEADLINE_MS),
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

  /** A new connection passes the port's gate (strangers.ts), then registers. */
  private onConnection(socket: net.Socket): void {
    const link = new Link(socket, PRE_AUTH_MAX_FRAME, HANDSHAKE_TYPES);
    const from = link.remote;
    void this.strangers
      .authenticate(link, (deadlineMs) =>
        authenticateAsAcceptor(link, {
          key: this.o.key,
          purpose: 'rendezvous',
          myRank: 0,
          job: '',
          deadlineMs,
          check: () => undefined,
        }),
      )
      .then(
        () => this.receiveRegistration(link),
        (err: Error) => {
          // dropped by the gate; a process with the wrong secret is named by the timeout message
          if (err instanceof AuthenticationError && err.claimedRank !== undefined)
            this.authFailures.set(err.claimedRank, from);
        },
      )
      .catch((err: Error) => this.strangers.drop(link, err.message));
  }

  private name(r: number): string {
    return this.o.rankNames?.[r] ?? `rank ${r}`;
  }

  /** An authenticated rank's registration, within the handshake's time. */
  private async receiveRegistration(link: Link): Promise<void> {
    const handshakeMs = Math.min(this.o.timeoutMs, 10_000);
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
