/**
 * The event-driven simulations on cases small enough to trace by hand: Downpour on two devices
 * with the in-memory server as one FIFO queue, the same over a link, the round-robin sync
 * baseline, and a straggler in a lockstep (hybrid) step.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { simulateServer, simulateSync, type ServerJob } from '../../src/simulate/serverSim.ts';
import { runLockstep } from '../../src/simulate/lockstep.ts';
import { StragglerSampler, parseStragglers, parseStragglerList, NO_STRAGGLERS } from '../../src/simulate/stragglers.ts';
import { parseLink } from '../../src/simulate/units.ts';

const ms = 1e-3;
const close = (a: number, b: number, eps = 1e-12) => assert.ok(Math.abs(a - b) <= eps, `${a} ≠ ${b}`);

/** Two devices, one process: a pull copies for 1 ms, a push updates for 2 ms, a step computes 10 ms. */
function inMemoryJob(steps: number): ServerJob {
  return {
    devices: 2,
    hosts: 1,
    perHost: 2,
    steps,
    compute: 10 * ms,
    paramBytes: 1e6,
    update: 2 * ms,
    elastic: 0,
    net: { tcp: { link: parseLink('1gbit:0us') }, shm: { alpha: 0, beta: 1e9 } },
    stragglers: new StragglerSampler(NO_STRAGGLERS, 1),
  };
}

test('async, two devices, in-memory server: the lock is one FIFO queue (traced by hand)', () => {
  // d0: pull [0,1] v=0, compute [1,11], push [11,13] staleness 0; pull waits for d1's push [13,15]: [15,16] v=2;
  //     compute [16,26], push [26,28] staleness 0 → done at 28
  // d1: pull [1,2] (waited 1), compute [2,12], push waits: [13,15] staleness 1; pull [16,17] (waited 1) v=2;
  //     compute [17,27], push [28,30] (waited 1) staleness 1 → done at 30
  const o = simulateServer(inMemoryJob(2), { kind: 'async', fetchEvery: 1, pushEvery: 1 });
  assert.deepEqual(o.staleness, [0, 1, 0, 1]);
  close(o.seconds, 30 * ms);
  close(o.stepSeconds, ((28 + 30) / 2 / 2) * ms);
  // waits: d0 2 ms of 28 (its pull behind d1's push), d1 1 ms at each of its 4 calls, of 30
  close(o.idleShare, (2 / 28 + 4 / 30) / 2);
  // per step: one pull and one push (the pull before the first step is start-up)
  assert.equal(o.bytesPerStep, 2e6);
  assert.equal(o.dropped, 0);
});

test('async with a staleness bound: a dropped gradient is followed by a pull', () => {
  const o = simulateServer(inMemoryJob(2), { kind: 'async', fetchEvery: 1, pushEvery: 1, maxStaleness: 0 });
  // d1's first push (staleness 1) is dropped; it pulls at once [15,16] v=1 (d0's update only), then its step-1 pull follows
  assert.equal(o.dropped, 2);
  assert.deepEqual(o.staleness, [0, 0]);
});

test("async over a link: transfers queue on the server host's link, then wait α", () => {
  // 2 processes × 1 device: device 0 shares the server's host (loopback), device 1 crosses a 1 MB/s link with α = 1 ms
  const job: ServerJob = {
    ...inMemoryJob(1),
    hosts: 2,
    perHost: 1,
    paramBytes: 1000,
    net: { tcp: { link: { name: 'slow', alpha: 1 * ms, beta: 1e6 } }, shm: { alpha: 0, beta: 1e9 } },
  };
  const o = simulateServer(job, { kind: 'async', fetchEvery: 1, pushEvery: 1 });
  // d1: request α [0,1], the server copies the weights (1000 B at 1 GB/s: 1 µs), 1000 B at 1 MB/s [1.001,2.001],
  //     arrives +α = 3.001; compute [3.001,13.001]; push [13.001,14.001] + α = 15.001, update [15.001,17.001], reply +α = 18.001
  // d0 (loopback: the shm α of 0 and 1 GB/s): pull done at 2 µs, compute to 10.002, push at 10.003, update [10.003, 12.003]
  close(o.seconds, 18.001 * ms, 1e-9);
  assert.deepEqual(o.staleness, [0, 1]);
});

test('async: a device beside the server reaches it over loopback (its own α and β), not the link', () => {
  const job: ServerJob = {
    ...inMemoryJob(1),
    hosts: 2,
    perHost: 1,
    paramBytes: 1000,
    net: {
      tcp: { link: { name: 'slow', alpha: 1 * ms, beta: 1e6 }, loopback: { name: 'lo', alpha: 0.1 * ms, beta: 1e7 } },
      shm: { alpha: 0, beta: 1e9 },
    },
  };
  const o = simulateServer(job, { kind: 'async', fetchEvery: 1, pushEvery: 1 });
  // d0: request 0.1, copy 1 µs, 1000 B at 10 MB/s (0.1) + 0.1 → 0.301; compute → 10.301; push 0.1 + 0.1 → 10.501,
  //     update [10.501, 12.501], reply + 0.1 → 12.601
  close(o.deviceStepSeconds[0]!, 12.601 * ms, 1e-9);
  close(o.deviceStepSeconds[1]!, 18.001 * ms, 1e-9);
});

test("sync: devices take turns; a step is the sum of every device's pull, compute and push", () => {
  const o = simulateSync(inMemoryJob(3));
  // per device turn: pull 1 ms + compute 10 + update 2; 2 devices × 3 steps
  close(o.seconds, 3 * 2 * 13 * ms);
  close(o.idleShare, 0.5);
  assert.ok(o.staleness.every((s) => s === 0));
});

test('a straggler in a lockstep step: everyone waits for it', () => {
  const plan = { compute: 10 * ms, tail: () => 3 * ms, bytes: 100 };
  const slow = new StragglerSampler(parseStragglers('fixed:2@1'), 1);
  const o = runLockstep(plan, 4, 10, slow);
  // the step: 2 × 10 ms of compute (device 1), then 3 ms; the three others idle 10 ms each
  close(o.stepSeconds, 23 * ms);
  close(o.idleShare, ((2 - 5 / 4) * 10) / 23);
  assert.equal(o.bytesPerStep, 100);
  // with a periodic round every 3 steps (simulated steps rounded up to whole periods)
  const p = runLockstep(
    { ...plan, periodic: { every: 3, seconds: 6 * ms, bytes: 30 } },
    4,
    10,
    new StragglerSampler(NO_STRAGGLERS, 1),
  );
  close(p.stepSeconds, 15 * ms);
  assert.equal(p.bytesPerStep, 110);
});

test('straggler distributions: log-normal with mean 1, fixed devices, parse errors', () => {
  const s = new StragglerSampler(parseStragglers('lognormal:0.5'), 3);
  let sum = 0;
  const N = 20000;
  for (let k = 0; k < N; k++) sum += s.factor(k % 7, Math.floor(k / 7));
  assert.ok(Math.abs(sum / N - 1) < 0.02, `mean ${sum / N}`);
  // deterministic: the same seed, device and step give the same factor
  assert.equal(new StragglerSampler(parseStragglers('lognormal:0.5'), 3).factor(2, 9), s.factor(2, 9));
  assert.equal(new StragglerSampler(parseStragglers('fixed:1.5@3,4'), 1).factor(4, 0), 1.5);
  assert.deepEqual(
    parseStragglerList('none,lognormal:0.2,fixed:2@0,1').map((x) => x.name),
    ['none', 'lognormal:0.2', 'fixed:2@0,1'],
  );
  assert.throws(() => parseStragglers('gamma:2'), /--stragglers: 'gamma:2' is not a straggler distribution/);
  assert.throws(() => new StragglerSampler(parseStragglers('run'), 1), /--from RUN_DIR/);
});
