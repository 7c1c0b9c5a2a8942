/**
 * The cost model against hand-computed cases and against an independent reference: the pipelined
 * ring's closed form against a step-by-step max-plus recurrence of its frames, the textbook
 * 2(G − 1)(α + n/(Gβ)) where a segment is one frame, and the byte counts of the shared-memory
 * transport against what real 2-device runs of this repository reported in metrics.jsonl.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  allreduce,
  chainBroadcast,
  frameBytes,
  FRAME_HEADER_BYTES,
  ringAllreduce,
  ringHalf,
  ringStepsTime,
  shmAllreduce,
  type TcpModel,
} from '../../src/simulate/costModel.ts';
import { parseDevices, parseLink, parseRate } from '../../src/simulate/units.ts';
import { trickWorkload, markForTrick, stripMarks } from '../../src/simulate/trick.ts';
import { trickPlan, gradientBuckets } from '../../src/simulate/lockstep.ts';
import { modelStructure } from '../../src/simulate/profile.ts';
import { loadConfig } from '../../src/config/index.ts';

const close = (a: number, b: number, rel = 1e-9) =>
  assert.ok(Math.abs(a - b) <= rel * Math.max(Math.abs(a), Math.abs(b)), `${a} ≠ ${b}`);

/** Frame by frame: frame j of step s leaves once this rank's link is free and frame j of step s − 1 has arrived. */
function ringByRecurrence(S: number, m: number, f: number, alpha: number): number {
  let prev: number[] = [];
  for (let s = 0; s < S; s++) {
    const cur: number[] = [];
    let linkFree = s === 0 ? 0 : prev[m - 1]!;
    for (let j = 0; j < m; j++) {
      const ready = s === 0 ? 0 : prev[j]! + alpha;
      linkFree = Math.max(linkFree, ready) + f;
      cur.push(linkFree);
    }
    prev = cur;
  }
  return prev[m - 1]! + alpha;
}

test('the pipelined ring closed form equals the frame-by-frame recurrence', () => {
  let seed = 12345;
  const rnd = () => (seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648;
  for (let k = 0; k < 200; k++) {
    const S = 1 + Math.floor(rnd() * 40),
      frames = 1 + Math.floor(rnd() * 12);
    const seg = frames * 65536,
      beta = 1e7 + rnd() * 1e10,
      alpha = rnd() < 0.2 ? 0 : rnd() * 5e-3;
    const m: TcpModel = { link: { name: 'x', alpha, beta }, native: false, chunkBytes: 65536 };
    const f = (65536 + FRAME_HEADER_BYTES) / beta;
    close(ringStepsTime(S, seg, m), ringByRecurrence(S, frames, f, alpha));
  }
});

test("one frame per segment: the textbook 2(G−1)(α + n/(Gβ)) (plus each frame's header)", () => {
  const link = parseLink('10gbit:50us');
  const n = 4 << 20,
    G = 4;
  const r = ringAllreduce(n, G, { link, native: false, chunkBytes: 4 << 20 });
  close(r.seconds, 2 * (G - 1) * (50e-6 + (n / G + 32) / 1.25e9));
  // sent and received: 2(G − 1) segments each way
  assert.equal(r.bytes, 4 * (G - 1) * (n / G));
  // reduce-scatter or allgather alone: half the steps
  close(
    ringHalf(n, G, { link, native: false, chunkBytes: 4 << 20 }).seconds,
    (G - 1) * (50e-6 + (n / G + 32) / 1.25e9),
  );
});

test('the native ring frames a 1 MiB segment in eighths: bandwidth-bound at 50 µs, latency-bound at 2 ms', () => {
  const seg = 1 << 20;
  assert.equal(frameBytes(seg, { link: parseLink('1gbit:1ms') }), 131072);
  // floor 64 KiB, ceiling chunkBytes
  assert.equal(frameBytes(65536, { link: parseLink('1gbit:1ms') }), 65536);
  assert.equal(frameBytes(64 << 20, { link: parseLink('1gbit:1ms') }), 1 << 20);
  const f = (131072 + 32) / 1.25e9; // 104.8832 µs
  // S = 6 steps of 8 frames: 48 frame times + α, or 13 frame times + 6α
  close(ringAllreduce(4 << 20, 4, { link: parseLink('10gbit:50us') }).seconds, 48 * f + 50e-6);
  close(ringAllreduce(4 << 20, 4, { link: parseLink('10gbit:2ms') }).seconds, 13 * f + 6 * 2e-3);
  close(48 * f + 50e-6, 5.0843936e-3, 1e-7);
  close(13 * f + 6 * 2e-3, 13.3634816e-3, 1e-7);
});

test("the host's ring loop caps a fast link; a broadcast is a pipelined chain", () => {
  const link = parseLink('100gbit:5us');
  const capped = ringAllreduce(8 << 20, 2, { link, native: false, chunkBytes: 8 << 20, hostRate: 1e9 });
  close(capped.seconds, 2 * (5e-6 + ((4 << 20) + 32) / 1e9));
  // 3 frames of 1 MiB through 4 ranks: (3 + 2) frame times and 3 latencies
  const b = chainBroadcast(3 << 20, 4, { link: parseLink('1gbit:100us') });
  close(b.seconds, (5 * ((1 << 20) + 32)) / 1.25e8 + 3 * 100e-6);
});

test('hierarchical: reduce-scatter in shared memory, L rings of n/L sharing the host link, allgather', () => {
  const net = {
    tcp: { link: parseLink('1gbit:100us'), native: false, chunkBytes: 16 << 20 },
    shm: { alpha: 5e-6, beta: 16e9 },
  };
  const n = 8 << 20;
  const h = allreduce(n, { hosts: 2, perHost: 2 }, net);
  // shm reduce-scatter: α + L·(n/L·L)/β; cross ring: 2 steps of n/4 on half the link; shm allgather: 2α + L·(2n(L−1)/L)/β
  const rs = 5e-6 + (2 * n) / 16e9,
    ag = 2 * 5e-6 + (2 * n) / 16e9;
  const ring = 2 * (100e-6 + (n / 4 + 32) / (1.25e8 / 2));
  close(h.seconds, rs + ring + ag);
  assert.equal(h.bytes, n + 4 * (n / 4) + n);
});

test('shared-memory bytes equal what 2-device runs report per step (metrics.jsonl)', async () => {
  // examples/mnist-small.yaml, hybrid on 2 devices: 1,350,240 bytes per step and device
  assert.equal(shmAllreduce(225040 * 4, 2, { alpha: 0, beta: 1e9 }).bytes, 1350240);
  // examples/alexnet-small.yaml, the trick on 2 devices (global batch 64): 1,218,272
  const config = loadConfig(new URL('../../examples/alexnet-small.yaml', import.meta.url).pathname);
  const costs = await modelStructure({ model: stripMarks(config.model), optimizer: config.optimizer, backend: 'js' });
  const w = trickWorkload(markForTrick(config.model), costs, 2, 64);
  assert.ok(w.feasible);
  const plan = trickPlan(
    w,
    costs,
    { hosts: 1, perHost: 2 },
    { tcp: { link: parseLink('1gbit:1ms') }, shm: { alpha: 0, beta: 1e9 } },
  );
  assert.equal(plan.bytes, 1218272);
  // one bucket under 4 MiB for the replicated part; data parallel buckets the 1024×1024 layer alone first
  assert.equal(gradientBuckets(costs, 32, 4 << 20).length, 2);
});

test('units: rates, links and device lists', () => {
  assert.equal(parseRate('10gbit', '--link'), 1.25e9);
  assert.equal(parseRate('4GB/s', '--shm'), 4e9);
  assert.deepEqual(parseLink('100mbit:2ms'), { name: '100mbit:2ms', beta: 12.5e6, alpha: 2e-3 });
  assert.deepEqual(parseDevices('8,64,512'), [8, 64, 512]);
  assert.deepEqual(parseDevices('1..16,3'), [1, 2, 3, 4, 8, 16]);
  assert.throws(() => parseLink('10gbit'), /--link: '10gbit' is not BANDWIDTH:LATENCY; write e\.g\. 10gbit:50us/);
  assert.throws(() => parseLink('10gbits:5us'), /--link: '10gbits' is not a rate/);
  assert.throws(() => parseDevices('0'), /--devices: '0' is not a device count/);
});
