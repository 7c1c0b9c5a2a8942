/** The shm waits' learned spin: the policy alone, and waitWhileEqual teaching it. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { availableParallelism } from 'node:os';
import { Worker } from 'node:worker_threads';
import { AdaptiveSpin, createShmWorld, spinFromEnv, waitWhileEqual } from '../../src/comm/shm/index.ts';

test('a learned spin stays long while most waits end within it, turns short once most do not, and comes back', () => {
  const noisy = new AdaptiveSpin(50, 1000, 16);
  assert.equal(noisy.micros, 1000);
  // one wait in four too long for the spin (a noisy peer): spinning still pays
  for (let i = 0; i < 64; i++) noisy.record(i % 4 === 0 ? 5 : 0.2);
  assert.equal(noisy.micros, 1000);
  // a run of long waits (a peer descheduled, an oversubscribed machine): the 11th brings the share under half
  const spin = new AdaptiveSpin(50, 1000, 16);
  for (let i = 0; i < 10; i++) spin.record(3);
  assert.equal(spin.micros, 1000);
  spin.record(3);
  assert.equal(spin.micros, 50);
  // short waits again (measured while sleeping: the wake-up included) bring the long spin back
  spin.record(0.4);
  assert.equal(spin.micros, 1000);
  // the boundary: a wait of exactly maxMicros is short
  const edge = new AdaptiveSpin(0, 1000, 1);
  edge.record(1.0001);
  assert.equal(edge.micros, 0);
  edge.record(1);
  assert.equal(edge.micros, 1000);
  assert.throws(() => new AdaptiveSpin(100, 50), /0 ≤ minMicros ≤ maxMicros/);
  assert.throws(() => new AdaptiveSpin(-1, 50), /0 ≤ minMicros ≤ maxMicros/);
  assert.throws(() => new AdaptiveSpin(0, 50, 0), /window ≥ 1/);
});

class Spy extends AdaptiveSpin {
  readonly waits: number[] = [];
  override record(waitedMs: number): void {
    this.waits.push(waitedMs);
    super.record(waitedMs);
  }
}

test('waitWhileEqual spins for the learned time and teaches it every wait that ends, not the ones that never began', () => {
  const i32 = new Int32Array(new SharedArrayBuffer(8));
  const spin = new Spy(0, 1000, 1);
  i32[0] = 1;
  assert.equal(waitWhileEqual(i32, 0, 0, { adaptiveSpin: spin }), 0);
  assert.deepEqual(spin.waits, []);
  // another thread moves the word 40 ms later, long after the 1 ms spin: the wait sleeps and is recorded as long
  i32[0] = 0;
  const w = new Worker(
    `const { workerData: a } = require('node:worker_threads');
    setTimeout(() => { Atomics.store(a, 0, 2); Atomics.notify(a, 0); }, 40);`,
    { eval: true, workerData: i32 },
  );
  const waited = waitWhileEqual(i32, 0, 0, { adaptiveSpin: spin, sliceMs: 5 });
  void w.terminate();
  assert.equal(i32[0], 2);
  assert.equal(spin.waits.length, 1);
  assert.ok(waited >= 30 && spin.waits[0] === waited, `waited ${waited} ms, recorded ${spin.waits}`);
  assert.equal(spin.micros, 0);
});

test('worlds spin adaptively when every rank has a core, not at all beyond, and check a given spin', (t) => {
  const saved = process.env.PARATRAIN_SHM_SPIN;
  t.after(() => {
    if (saved !== undefined) process.env.PARATRAIN_SHM_SPIN = saved;
  });
  delete process.env.PARATRAIN_SHM_SPIN;
  assert.equal(createShmWorld(1).rankInit(0).spinMicros, 'adaptive');
  assert.equal(createShmWorld(availableParallelism() + 1).rankInit(0).spinMicros, 0);
  assert.equal(createShmWorld(1, { spinMicros: 200 }).rankInit(0).spinMicros, 200);
  for (const bad of [-1, Number.NaN, Infinity, 'fast']) {
    assert.throws(
      () => createShmWorld(1, { spinMicros: bad as number }),
      /spinMicros must be a number of µs ≥ 0 or 'adaptive', got /,
    );
  }
});

test('PARATRAIN_SHM_SPIN sets the spin of worlds whose options do not, and a bad value names it', (t) => {
  assert.equal(spinFromEnv({}), undefined);
  assert.equal(spinFromEnv({ PARATRAIN_SHM_SPIN: ' ' }), undefined);
  assert.equal(spinFromEnv({ PARATRAIN_SHM_SPIN: 'adaptive' }), 'adaptive');
  assert.equal(spinFromEnv({ PARATRAIN_SHM_SPIN: '250' }), 250);
  assert.equal(spinFromEnv({ PARATRAIN_SHM_SPIN: '0' }), 0);
  for (const bad of ['-1', 'fast', 'Infinity', '1ms']) {
    assert.throws(
      () => spinFromEnv({ PARATRAIN_SHM_SPIN: bad }),
      new RegExp(
        `^ShmUsageError: PARATRAIN_SHM_SPIN: expected a number of µs ≥ 0 or 'adaptive', got '${bad}'; unset it for the default$`,
      ),
    );
  }
  const saved = process.env.PARATRAIN_SHM_SPIN;
  t.after(() => {
    if (saved === undefined) delete process.env.PARATRAIN_SHM_SPIN;
    else process.env.PARATRAIN_SHM_SPIN = saved;
  });
  process.env.PARATRAIN_SHM_SPIN = '50';
  assert.equal(createShmWorld(1).rankInit(0).spinMicros, 50);
  assert.equal(createShmWorld(availableParallelism() + 1).rankInit(0).spinMicros, 50);
  assert.equal(createShmWorld(1, { spinMicros: 'adaptive' }).rankInit(0).spinMicros, 'adaptive');
  process.env.PARATRAIN_SHM_SPIN = 'adaptive';
  assert.equal(createShmWorld(availableParallelism() + 1).rankInit(0).spinMicros, 'adaptive');
});
