/**
 * The server link shared as TCP flows share it (src/simulate/sharedLink.ts), on cases computed by
 * hand, and the parameter server's remote devices on it: two that start together share every
 * transfer, two half a step apart share none, and the prediction over phases lies between.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { SharedLink } from '../../src/simulate/sharedLink.ts';
import { simulateServer, simulateServerOverPhases, type ServerJob } from '../../src/simulate/serverSim.ts';
import { StragglerSampler, NO_STRAGGLERS } from '../../src/simulate/stragglers.ts';

const close = (a: number, b: number, eps = 1e-9) => assert.ok(Math.abs(a - b) <= eps, `${a} ≠ ${b}`);

/** Runs a link's transfers to their ends: `starts` as [time, bytes]; returns each one's end. */
function ends(rate: number, starts: [number, number][]): number[] {
  const link = new SharedLink(rate),
    out: number[] = [];
  const pending = starts.map(([t, bytes], i) => ({ t, bytes, i })).sort((a, b) => a.t - b.t);
  for (;;) {
    const next = pending[0],
      finish = link.nextFinish();
    if (!next && finish === Infinity) return out;
    if (next && next.t <= finish) {
      pending.shift();
      link.start(next.t, next.bytes, (at) => {
        out[next.i] = at;
      });
    } else link.finishUntil(finish);
  }
}

test('a shared link: one transfer alone moves at the full rate', () => {
  assert.deepEqual(ends(1000, [[2, 500]]), [2.5]);
});

test('a shared link: overlapping transfers split the rate equally while they overlap (not first come, first served)', () => {
  // 1000 B/s. A: 1000 B from 0; B: 1000 B from 0.5. A alone moves 500 by 0.5; then 500 B/s each: A's
  // last 500 B end at 1.5 (FIFO: 1.0); B has moved 500 by then, its last 500 alone: 2.0
  const [a, b] = ends(1000, [
    [0, 1000],
    [0.5, 1000],
  ]);
  close(a!, 1.5);
  close(b!, 2.0);
  // two that start together end together, after both their bytes at the full rate
  const [c, d] = ends(1000, [
    [0, 1000],
    [0, 1000],
  ]);
  close(c!, 2);
  close(d!, 2);
  // three: C (300 B) ends when each has moved 300 at a third of the rate (0.9); then 700 B left
  // between A and B at half (1.4 more): 2.3 for the two of 1000 B, which is all 2300 B at 1000 B/s
  const [e, f, g] = ends(1000, [
    [0, 1000],
    [0, 1000],
    [0, 300],
  ]);
  close(g!, 0.9);
  close(e!, 2.3);
  close(f!, 2.3);
});

/** Three processes, one device each: devices 1 and 2 pull and push 1000 B over a 1000 B/s link (α 0); compute 0.1 s; no server work. */
function remoteJob(start?: number[]): ServerJob {
  return {
    devices: 3,
    hosts: 3,
    perHost: 1,
    steps: 4,
    compute: 0.1,
    paramBytes: 1000,
    update: 0,
    elastic: 0,
    net: {
      tcp: { link: { name: 'test', alpha: 0, beta: 1000 }, loopback: { name: 'lo', alpha: 0, beta: 1e9 } },
      shm: { alpha: 0, beta: 1e12 },
    },
    stragglers: new StragglerSampler(NO_STRAGGLERS, 1),
    ...(start ? { start } : {}),
  };
}
const rule = { kind: 'async' as const, fetchEvery: 1, pushEvery: 1 };

test('async: two remote devices that start together share every pull and push; half a step apart they share none', () => {
  // together: both pulls at half rate (2 s), compute 0.1, both pushes at half rate (2 s): 4.1 s a step
  const together = simulateServer(remoteJob(), rule);
  close(together.deviceStepSeconds[1]!, 4.1, 1e-6);
  close(together.deviceStepSeconds[2]!, 4.1, 1e-6);
  // device 2 starts 1.05 s later (half of the 2.1 s step alone): its pull runs while device 1 pushes
  // (the link's other direction), so neither ever waits: 2.1 s a step
  const apart = simulateServer(remoteJob([0, 0, 1.05]), rule);
  close(apart.deviceStepSeconds[1]!, 2.1, 1e-6);
  close(apart.deviceStepSeconds[2]!, 2.1, 1e-6);
  // over the phases: between the two, the same for every seed's draw of u up to the lattice's spacing
  const mean = simulateServerOverPhases(remoteJob(), rule, 1);
  const [d1, d2] = [mean.deviceStepSeconds[1]!, mean.deviceStepSeconds[2]!];
  assert.ok(d1 > 2.1 && d1 < 4.1 && d2 > 2.1 && d2 < 4.1, `${d1}, ${d2}`);
  assert.ok(Math.abs(simulateServerOverPhases(remoteJob(), rule, 2).deviceStepSeconds[1]! - d1) < 0.1);
  assert.equal(mean.staleness.length, 32 * 3 * 4, 'staleness pooled over 32 runs');
});

test('async: with one remote device nothing shares the link, and the phases are not sampled', () => {
  const job: ServerJob = { ...remoteJob(), devices: 2, hosts: 2 };
  assert.deepEqual(simulateServerOverPhases(job, rule, 1), simulateServer(job, rule));
});
