/**
 * The data ports of a real 2-process job are gated like the master port (comm/tcp/strangers.ts):
 * a few hundred silent connections to each of process 0's data listeners (its device thread's TCP
 * world and its main thread's control world) while the job trains are all dropped within the 2 s
 * authentication deadline, both listeners keep accepting (a connection with the job's secret still
 * completes its handshake at once), and the job then stops cleanly on SIGINT at one step on both
 * processes. All traffic is on 127.0.0.1, bounded in count and time.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, readlinkSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import { join } from 'node:path';
import { cliArgs, REPO, tmpDir } from '../cli/helpers.ts';
import { randomPort, SECRET, tinyJobConfig } from './jobHelpers.ts';
import { authenticateAsDialer } from '../../src/comm/tcp/auth.ts';
import { PRE_AUTH_MAX_FRAME } from '../../src/comm/tcp/frame.ts';
import { Link } from '../../src/comm/tcp/link.ts';
import { HANDSHAKE_TYPES } from '../../src/comm/tcp/rendezvous.ts';

const FLOOD_PER_PORT = 300;

interface Proc {
  child: ChildProcess;
  stderr: () => string;
  exit: Promise<number | null>;
  exited: () => boolean;
}

function startProcess(rank: number, args: string[], masterPort: number): Proc {
  const child = spawn(process.execPath, [...cliArgs(), ...args], {
    cwd: REPO,
    env: {
      ...process.env,
      PARATRAIN_OFFLINE: '1',
      PARATRAIN_SECRET: SECRET,
      RANK: String(rank),
      WORLD_SIZE: '2',
      MASTER_ADDR: '127.0.0.1',
      MASTER_PORT: String(masterPort),
    },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  child.stderr!.setEncoding('utf8').on('data', (d: string) => {
    stderr += d;
  });
  const killer = setTimeout(() => child.kill('SIGKILL'), 60_000);
  let exited = false;
  const exit = new Promise<number | null>((resolve) =>
    child.on('close', (code) => {
      clearTimeout(killer);
      exited = true;
      resolve(code);
    }),
  );
  return { child, stderr: () => stderr, exit, exited: () => exited };
}

/** The IPv4 TCP ports process `pid` listens on (Linux: its socket descriptors matched in /proc/net/tcp). */
function listeningPorts(pid: number): number[] {
  const inodes = new Set<string>();
  for (const fd of readdirSync(`/proc/${pid}/fd`)) {
    try {
      const m = /^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/${pid}/fd/${fd}`));
      if (m) inodes.add(m[1]!);
    } catch {
      // closed meanwhile
    }
  }
  const ports: number[] = [];
  for (const line of readFileSync(`/proc/${pid}/net/tcp`, 'utf8').split('\n').slice(1)) {
    const f = line.trim().split(/\s+/);
    // local_address is HEX_IP:HEX_PORT; state 0A is LISTEN; field 9 the inode
    if (f.length > 9 && f[3] === '0A' && inodes.has(f[9]!)) ports.push(Number.parseInt(f[1]!.split(':')[1]!, 16));
  }
  return ports;
}

/** `n` connections to 127.0.0.1:port that never send a byte; counts those the other side closes. */
function silentSockets(port: number, n: number): { closed: () => number; destroy: () => void } {
  let closed = 0,
    ours = false;
  const sockets = Array.from({ length: n }, () => {
    const s = net.connect(port, '127.0.0.1');
    s.on('error', () => {});
    s.on('close', () => {
      if (!ours) closed++;
    });
    return s;
  });
  return {
    closed: () => closed,
    destroy: () => {
      ours = true;
      for (const s of sockets) s.destroy();
    },
  };
}

/**
 * Dials 127.0.0.1:port as process 1 of the job with its secret: the listener must accept and both
 * sides prove the secret; it then refuses this dialer, which is of no job it knows, after the proofs.
 * Resolves with how long that took.
 */
async function authenticatedDial(port: number): Promise<number> {
  const t0 = performance.now();
  const socket = net.connect(port, '127.0.0.1');
  await new Promise<void>((resolve, reject) => {
    socket.once('connect', () => resolve());
    socket.once('error', reject);
  });
  const link = new Link(socket, PRE_AUTH_MAX_FRAME, HANDSHAKE_TYPES);
  try {
    await assert.rejects(
      authenticateAsDialer(link, {
        key: Buffer.from(SECRET),
        purpose: 'data',
        myRank: 1,
        peerRank: 0,
        job: '',
        peerDesc: `process 0's data port ${port}`,
        deadlineMs: 5000,
      }),
      /refused this rank: you belong to another job/,
    );
  } finally {
    link.destroy();
  }
  return performance.now() - t0;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

test('silent connections to the data ports of a 2-process job are dropped within the 2 s deadline, both listeners keep accepting, the job stops cleanly', {
  timeout: 60_000,
}, async () => {
  const dir = tmpDir('paratrain-data-flood-');
  const cfg = tinyJobConfig(dir);
  // far longer than the test: it is stopped with SIGINT once the flood is judged
  writeFileSync(cfg, readFileSync(cfg, 'utf8').replace('epochs: 1,', 'epochs: 400,'));
  const out = join(dir, 'run');
  const masterPort = randomPort();
  const args = ['train', cfg, '--devices', '1', '--strategy', 'hybrid', '--out', out];
  const procs = [0, 1].map((rank) => startProcess(rank, args, masterPort));
  const floods: ReturnType<typeof silentSockets>[] = [];
  try {
    const metrics = join(out, 'metrics.jsonl');
    for (let waited = 0; !(existsSync(metrics) && readFileSync(metrics, 'utf8').includes('"type":"step"')); waited++) {
      const gone = procs.find((p) => p.exited());
      assert.ok(waited < 400 && !gone, `the job did not start training\n${procs.map((p) => p.stderr()).join('\n')}`);
      await sleep(100);
    }
    // after the rendezvous the master ports are closed: what process 0 listens on are its data ports
    const ports = listeningPorts(procs[0]!.child.pid!);
    assert.equal(
      ports.length,
      2,
      `process 0's data listeners: its device thread's world and the control world (${ports})`,
    );
    for (const port of ports) floods.push(silentSockets(port, FLOOD_PER_PORT));
    for (const port of ports) {
      // a listener that waited on the silent connections one by one would take their 2 s deadline
      // each (16 pending per address: over 30 s); the device thread that listens computes steps
      // between its turns of the event loop, so on a loaded machine a good handshake takes seconds
      const ms = await authenticatedDial(port);
      assert.ok(
        ms < 5000,
        `a connection with the secret to data port ${port} completed its handshake in ${ms.toFixed(0)} ms`,
      );
    }
    // 2 s deadline, plus scheduling slack on a loaded machine
    for (let waited = 0; floods.some((f) => f.closed() < FLOOD_PER_PORT) && waited < 45; waited++) await sleep(100);
    for (const [i, port] of ports.entries())
      assert.equal(floods[i]!.closed(), FLOOD_PER_PORT, `every silent connection to data port ${port} was dropped`);
    for (const p of procs) p.child.kill('SIGINT');
    const codes = await Promise.all(procs.map((p) => p.exit));
    assert.deepEqual(codes, [130, 130], procs.map((p) => p.stderr()).join('\n'));
    const stopped = readFileSync(metrics, 'utf8')
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l) as { type: string; step?: number })
      .find((e) => e.type === 'stopped');
    assert.ok(stopped && stopped.step! > 0, `the job stopped after a step, with a checkpoint\n${procs[0]!.stderr()}`);
    assert.match(
      procs[0]!.stderr(),
      /dropped the oldest unauthenticated connection from 127\.0\.0\.1:\d+ to rank 0's data port/,
    );
  } finally {
    for (const f of floods) f.destroy();
    for (const p of procs) p.child.kill('SIGKILL');
  }
});
