/**
 * An emulated network of H hosts for scripts/emulated-network.ts: one network namespace per host,
 * each joined by a veth pair to a router namespace, every link shaped by tbf (rate, both
 * directions) and delayed by a user-space relay (scripts/net-delay.c compiled here, else
 * scripts/net-delay.py: this kernel has no sch_netem). Packets from host i to host j: i's veth (tbf) → router → TUN → relay (held d) →
 * TUN → policy route → j's veth (tbf) → j. The MTU (default 9,000, jumbo frames) trades the
 * relay's per-packet cost (Python: fewer, larger packets) against tbf's burst, one packet: after a
 * pause that much of a message crosses at once, faster than the link (64 KiB packets make every
 * small collective 5 ms too fast at 100 Mbit/s). Addresses are 10.99.N.10 + i inside these namespaces
 * only; every name carries a random tag, and destroy() removes all of it (namespaces take their
 * veths and the TUN device with them).
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { existsSync, readFileSync, renameSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

export interface LinkShape {
  /** bytes per second, each direction of each host's link */
  rate: number;
  /** one-way delay the relay adds, seconds */
  delay: number;
}

const DELAY_SCRIPT = fileURLToPath(new URL('./net-delay.py', import.meta.url));
const DELAY_SOURCE = fileURLToPath(new URL('./net-delay.c', import.meta.url));
const PYTHON = '/usr/bin/python3';

/**
 * The relay's command: net-delay.c compiled with the system's cc (once per source, in the temp
 * directory), else the Python relay. The C one costs a few µs a packet, the Python one ~100 µs on a
 * busy machine: enough to cap the two directions of a ring at 250 Mbit/s each.
 */
export function relayCommand(): { command: string[]; kind: 'C' | 'Python' } {
  const source = readFileSync(DELAY_SOURCE);
  const binary = join(
    tmpdir(),
    `paratrain-net-delay-${createHash('sha256').update(source).digest('hex').slice(0, 12)}`,
  );
  if (!existsSync(binary)) {
    try {
      execFileSync('cc', ['-O2', '-o', `${binary}.tmp-${process.pid}`, DELAY_SOURCE], {
        stdio: 'ignore',
        timeout: 60_000,
      });
      renameSync(`${binary}.tmp-${process.pid}`, binary);
    } catch {
      return { command: [PYTHON, DELAY_SCRIPT], kind: 'Python' };
    }
  }
  return { command: [binary], kind: 'C' };
}

function ip(args: string[]): string {
  return execFileSync('ip', args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], timeout: 10_000 });
}

/** Why namespaces cannot be made here (null: they can). */
export function namespacesUnavailable(): string | null {
  if (process.getuid?.() !== 0) return 'not root (network namespaces need CAP_SYS_ADMIN and CAP_NET_ADMIN)';
  for (const tool of ['ip', 'tc']) {
    try {
      execFileSync(tool, ['-V'], { stdio: 'ignore', timeout: 5000 });
    } catch {
      return `the '${tool}' command (iproute2) is missing`;
    }
  }
  try {
    execFileSync(PYTHON, ['-c', 'import fcntl, select'], { stdio: 'ignore', timeout: 10_000 });
  } catch {
    return `${PYTHON} is missing (the delay relay)`;
  }
  return null;
}

export class EmulatedNetwork {
  readonly tag = `pt${randomBytes(2).toString('hex')}`;
  readonly subnet = 1 + (randomBytes(1)[0]! % 250);
  readonly router = `${this.tag}-r`;
  readonly tun = `${this.tag}t`;
  private relay: ChildProcess | null = null;
  private made: string[] = [];
  /** veth ends created in this namespace (moved at once; deleted here if a move failed) */
  private veths: string[] = [];

  /** the delay relay: C where a compiler is found, else Python */
  readonly relayKind = relayCommand();

  constructor(
    readonly hosts: number,
    readonly mtu = 9000,
  ) {}

  host(i: number): string {
    return `${this.tag}-h${i}`;
  }
  address(i: number): string {
    return `10.99.${this.subnet}.${10 + i}`;
  }
  private inner(i: number): string {
    return `${this.tag}h${i}a`;
  }
  private outer(i: number): string {
    return `${this.tag}h${i}b`;
  }

  /** Creates the namespaces, veths, TUN device and routes (no shaping yet). */
  create(): void {
    const gw = `10.99.${this.subnet}.1`;
    this.ns(this.router);
    const r = (args: string[]) => ip(['-n', this.router, ...args]);
    r(['link', 'set', 'lo', 'up']);
    r(['tuntap', 'add', 'dev', this.tun, 'mode', 'tun']);
    r(['link', 'set', this.tun, 'up', 'mtu', String(this.mtu)]);
    this.sysctl(this.router, 'net/ipv4/ip_forward', '1');
    for (const which of ['all', 'default']) this.sysctl(this.router, `net/ipv4/conf/${which}/rp_filter`, '0');
    r(['rule', 'add', 'iif', this.tun, 'lookup', '100']);
    for (let i = 0; i < this.hosts; i++) {
      const h = this.host(i);
      this.ns(h);
      ip(['link', 'add', this.inner(i), 'type', 'veth', 'peer', 'name', this.outer(i)]);
      this.veths.push(this.inner(i), this.outer(i));
      ip(['link', 'set', this.inner(i), 'netns', h]);
      ip(['link', 'set', this.outer(i), 'netns', this.router]);
      const n = (args: string[]) => ip(['-n', h, ...args]);
      n(['link', 'set', 'lo', 'up']);
      n(['addr', 'add', `${this.address(i)}/32`, 'dev', this.inner(i)]);
      n(['link', 'set', this.inner(i), 'up', 'mtu', String(this.mtu)]);
      n(['route', 'add', gw, 'dev', this.inner(i)]);
      n(['route', 'add', `10.99.${this.subnet}.0/24`, 'via', gw, 'dev', this.inner(i)]);
      r(['addr', 'add', `${gw}/32`, 'dev', this.outer(i)]);
      r(['link', 'set', this.outer(i), 'up', 'mtu', String(this.mtu)]);
      this.sysctl(this.router, `net/ipv4/conf/${this.outer(i)}/rp_filter`, '0');
      // to the relay first; what comes back out of the TUN device goes to the host
      r(['route', 'add', `${this.address(i)}/32`, 'dev', this.tun]);
      r(['route', 'add', `${this.address(i)}/32`, 'dev', this.outer(i), 'table', '100']);
    }
  }

  /** Shapes every host's link (tbf both ways) and (re)starts the relay with the delay. */
  async shape(s: LinkShape, maxSeconds: number): Promise<void> {
    await this.stopRelay();
    // the bucket holds one packet: after a pause a message may not cross faster than the link
    // (a larger burst lets the first burst-worth of every message through at memory speed)
    const burst = this.mtu + 1024;
    const limit = Math.max(256 * 1024, Math.ceil(s.rate * 0.02));
    const tbf = (ns: string, dev: string) =>
      ip([
        'netns',
        'exec',
        ns,
        'tc',
        'qdisc',
        'replace',
        'dev',
        dev,
        'root',
        'tbf',
        'rate',
        `${Math.round(s.rate * 8)}bit`,
        'burst',
        String(burst),
        'limit',
        String(limit),
      ]);
    for (let i = 0; i < this.hosts; i++) {
      tbf(this.host(i), this.inner(i));
      tbf(this.router, this.outer(i));
    }
    const relay = spawn(
      'ip',
      ['netns', 'exec', this.router, ...this.relayKind.command, this.tun, String(s.delay), String(maxSeconds)],
      { stdio: ['pipe', 'pipe', 'inherit'] },
    );
    this.relay = relay;
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error('the delay relay did not start within 20 s')), 20_000);
      relay.stdout!.once('data', () => {
        clearTimeout(timer);
        resolve();
      });
      relay.once('exit', (code) => {
        clearTimeout(timer);
        reject(new Error(`the delay relay exited (code ${code})`));
      });
    });
  }

  /** Runs a command in host i's namespace. */
  spawnIn(i: number, command: string[], env: NodeJS.ProcessEnv): ChildProcess {
    return spawn('ip', ['netns', 'exec', this.host(i), ...command], { env, stdio: ['ignore', 'pipe', 'pipe'] });
  }

  private async stopRelay(): Promise<void> {
    const relay = this.relay;
    this.relay = null;
    if (!relay || relay.exitCode !== null) return;
    relay.stdin?.end();
    await new Promise<void>((resolve) => {
      const timer = setTimeout(() => {
        relay.kill('SIGKILL');
        resolve();
      }, 3000);
      relay.once('exit', () => {
        clearTimeout(timer);
        resolve();
      });
    });
  }

  /** Removes everything this object made (namespaces delete their veths and TUN device). */
  async destroy(): Promise<void> {
    await this.stopRelay();
    for (const ns of this.made.reverse()) {
      try {
        ip(['netns', 'del', ns]);
      } catch {
        /* already gone */
      }
    }
    for (const v of this.veths) {
      try {
        ip(['link', 'del', v]);
      } catch {
        /* moved into a namespace, gone with it */
      }
    }
    this.made = [];
    this.veths = [];
  }

  private ns(name: string): void {
    ip(['netns', 'add', name]);
    this.made.push(name);
  }

  private sysctl(ns: string, key: string, value: string): void {
    execFileSync('ip', ['netns', 'exec', ns, 'sh', '-c', `echo ${value} > /proc/sys/${key}`], {
      stdio: 'ignore',
      timeout: 5000,
    });
  }
}
