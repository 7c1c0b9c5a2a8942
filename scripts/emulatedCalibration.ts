/**
 * What scripts/emulated-network.ts measures besides the runs: the shaped link and host 0's
 * loopback as paratrain's TCP transport sees them (scripts/transport-probe.ts), and the machine
 * (CPU, cores, load) each measurement was taken on.
 */
import { readFileSync } from 'node:fs';
import { cpus, loadavg } from 'node:os';
import { execFileSync, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { randomBytes } from 'node:crypto';
import type { EmulatedNetwork } from './netns.ts';

const PROBE = fileURLToPath(new URL('./transport-probe.ts', import.meta.url));

/** A path measured through the transport: α per message, β one way and both ways at once (bytes/s). */
export interface PathMeasure {
  alpha: number;
  beta: number;
  betaBoth: number;
}

/** The link between hosts 0 and 1 and host 0's loopback, measured just before a run. */
export interface Calibration {
  link: PathMeasure;
  loopback: PathMeasure;
  load: number;
}

/** Waits for a child to exit; kills it after `ms`. Resolves with its exit code (null: killed). */
export function exited(child: ChildProcess, ms: number): Promise<number | null> {
  return new Promise((resolve) => {
    if (child.exitCode !== null) {
      resolve(child.exitCode);
      return;
    }
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
    }, ms);
    child.once('exit', (code) => {
      clearTimeout(timer);
      resolve(code);
    });
  });
}

/** Runs the transport probe's two ranks in hosts `a` and `b` (a = b: loopback in that host). */
async function probe(net: EmulatedNetwork, a: number, b: number, port: number, bytes: number): Promise<PathMeasure> {
  const master = a === b ? '127.0.0.1' : net.address(a);
  const env = { ...process.env, PARATRAIN_SECRET: randomBytes(32).toString('hex') };
  const args = (rank: number) => [
    process.execPath,
    '--import',
    'tsx',
    PROBE,
    String(rank),
    master,
    String(port),
    String(bytes),
  ];
  const r0 = net.spawnIn(a, args(0), env),
    r1 = net.spawnIn(b, args(1), env);
  let out = '',
    err = '';
  r1.stdout!.on('data', (d: Buffer) => {
    out += d.toString();
  });
  for (const c of [r0, r1])
    c.stderr!.on('data', (d: Buffer) => {
      err = (err + d.toString()).slice(-1000);
    });
  r0.stdout!.resume();
  const [c0, c1] = await Promise.all([exited(r0, 90_000), exited(r1, 90_000)]);
  if (c0 !== 0 || c1 !== 0) {
    const where = a === b ? `loopback in ${net.host(a)}` : `${net.host(a)} to ${net.host(b)}`;
    throw new Error(
      `the transport probe (${where}) failed (exit ${c0}/${c1}): ${err.trim().split('\n').slice(-2).join(' | ') || 'no output'}`,
    );
  }
  return JSON.parse(out.trim().split('\n').pop()!) as PathMeasure;
}

/** Measures the link (host 0 ↔ host 1) and host 0's loopback; `bytes` per bulk message (a few MB). */
export async function calibrate(net: EmulatedNetwork, bytes: number): Promise<Calibration> {
  const link = await probe(net, 0, 1, 29490, bytes);
  const loopback = await probe(net, 0, 0, 29491, bytes);
  return { link, loopback, load: loadavg()[0]! };
}

/** One line on the machine: CPU model, cores, load averages, kernel, TCP congestion control. */
export function machineLine(): string {
  const cpu = cpus()[0]?.model.trim() ?? 'unknown CPU';
  const cc = (() => {
    try {
      return readFileSync('/proc/sys/net/ipv4/tcp_congestion_control', 'utf8').trim();
    } catch {
      return '?';
    }
  })();
  const kernel = (() => {
    try {
      return execFileSync('uname', ['-r'], { encoding: 'utf8' }).trim();
    } catch {
      return '?';
    }
  })();
  return `machine: ${cpu}, ${cpus().length} cores, load average ${loadavg()
    .map((l) => l.toFixed(2))
    .join(' ')}; Linux ${kernel}, TCP ${cc}; Node ${process.version}`;
}
