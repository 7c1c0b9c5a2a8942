/**
 * Strangers cannot keep a TCP world from forming: a flood of idle connections (and some that send
 * a frame header one byte at a time) against the rendezvous port while a 2-rank job forms. Before
 * the stranger gate (comm/tcp/strangers.ts) 64 such connections held every pre-authentication slot
 * for 10 s and the real rank was refused; now the oldest stranger makes room, each has 2 s to prove
 * the secret, the job forms and completes, the master logs what it dropped, and a rendezvous that
 * times out during a flood names it. All traffic is on 127.0.0.1, bounded in count and time.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { encodeHeader, FrameType } from '../../src/comm/tcp/frame.ts';
import { describe as summary, runJob } from './tcp/harness.ts';

interface Flood {
  closedByServer: () => number;
  stop: () => void;
}

/**
 * Opens `idle` connections that never send a byte and `slow` ones that send a Hello header one
 * byte every 200 ms (at most 40 bytes each), all to 127.0.0.1:port; resolves once every one is connected.
 */
async function flood(port: number, idle: number, slow: number): Promise<Flood> {
  const sockets: net.Socket[] = [];
  const timers: NodeJS.Timeout[] = [];
  let closed = 0,
    stopping = false;
  const header = encodeHeader({ type: FrameType.Hello, flags: 0, arg: 0, seq: 0, tag: 0, aux: 0, length: 100 }, 0);
  await Promise.all(
    Array.from(
      { length: idle + slow },
      (_, i) =>
        new Promise<void>((resolve) => {
          const s = net.connect(port, '127.0.0.1', () => {
            if (i >= idle) {
              let at = 0;
              const t = setInterval(() => {
                if (at >= Math.min(header.length, 40) || s.destroyed) clearInterval(t);
                else s.write(header.subarray(at, ++at));
              }, 200);
              timers.push(t);
            }
            resolve();
          });
          s.on('error', () => {});
          s.on('close', () => {
            if (!stopping) closed++;
          });
          sockets.push(s);
        }),
    ),
  );
  return {
    closedByServer: () => closed,
    stop: () => {
      stopping = true;
      for (const t of timers) clearInterval(t);
      for (const s of sockets) s.destroy();
    },
  };
}

test('a flood of idle and slow strangers on the rendezvous port does not keep a 2-rank job from forming', {
  timeout: 60_000,
}, async () => {
  let strangers: Flood | undefined;
  try {
    const results = await runJob({
      worldSize: 2,
      scenario: 'collectives',
      params: { lengths: [7, 10_001] },
      // 8 s: before the gate, the 64 slots the flood took stayed taken for min(timeout, 10 s) and rank 1 never got in
      options: () => ({ timeoutMs: 8000 }),
      onListening: async (port) => {
        strangers = await flood(port, 100, 5);
      },
    });
    for (const r of results) assert.ok(r.ok, summary(results));
    const l0 = results[0]!.logs.join('\n');
    assert.match(
      l0,
      /warn: dropped the oldest unauthenticated connection from 127\.0\.0\.1:\d+ to the rendezvous port to make room/,
      l0,
    );
    assert.match(
      l0,
      /warn: rendezvous formed after dropping \d+ unauthenticated connections from 127\.0\.0\.1 that never proved the secret/,
      l0,
    );
    // one line per address, then counted: a flood does not flood the log
    assert.ok(results[0]!.logs.filter((l) => /dropped .*unauthenticated connection/.test(l)).length <= 3, l0);
    assert.ok(
      strangers!.closedByServer() >= 100 - 16,
      `the master dropped the strangers (${strangers!.closedByServer()} closed)`,
    );
  } finally {
    strangers?.stop();
  }
});

test('a rendezvous that times out during a flood names the flood, not only the missing process', {
  timeout: 60_000,
}, async () => {
  let strangers: Flood | undefined;
  try {
    const results = await runJob({
      worldSize: 2,
      ranks: [0],
      scenario: 'connect',
      options: () => ({ timeoutMs: 4000, rankNames: ['process 0', 'process 1'] }),
      onListening: async (port) => {
        strangers = await flood(port, 100, 0);
      },
    });
    const r = results[0]!;
    assert.equal(r.error?.name, 'CommTimeoutError', summary(results));
    // every idle stranger is gone by then: 84 made room for newer ones, 16 missed the 2 s deadline
    assert.match(r.error!.message, /never heard from process 1 \(/);
    assert.match(r.error!.message, /meanwhile 100 unauthenticated connections from 127\.0\.0\.1 were dropped/);
    assert.deepEqual(r.error!.missing, [1]);
  } finally {
    strangers?.stop();
  }
});

test('a flood of strangers on every data port does not keep ranks from dialing each other later (send/recv beyond the ring)', {
  timeout: 60_000,
}, async () => {
  const floods: Flood[] = [];
  try {
    const results = await runJob({
      // 4 ranks: send/recv to rank ± 2 dials links that the ring did not make, after the flood arrived
      worldSize: 4,
      scenario: 'collectives',
      params: { lengths: [7, 10_001] },
      onReady: async (addresses) => {
        for (const { port } of addresses.values()) floods.push(await flood(port, 100, 5));
      },
    });
    for (const r of results) assert.ok(r.ok, summary(results));
    for (const r of results) {
      const logs = r.logs.join('\n');
      // one line per address, then counted
      assert.ok(r.logs.filter((l) => /dropped .*unauthenticated connection/.test(l)).length <= 2, logs);
      assert.match(
        logs,
        new RegExp(
          `warn: dropped the oldest unauthenticated connection from 127\\.0\\.0\\.1:\\d+ to rank ${r.rank}'s data port to make room`,
        ),
        logs,
      );
    }
  } finally {
    for (const f of floods) f.stop();
  }
});
