/**
 * The shm transport never hangs: a rank that throws, world.abort() from the main thread,
 * comm.abort() from a rank, and a wait timeout all release every blocked rank within about a
 * second with an error naming who failed; mismatched calls and bad registrations are errors.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { runWorld, type RankResult } from './helpers.ts';

type Err = { name: string; message: string; failedRank?: number; missing?: number[] };
const errOf = (r: RankResult) => r.data.error as Err | undefined;

function assertReleased(results: RankResult[], culprit: number, check: (e: Err, r: RankResult) => void): void {
  for (const r of results) {
    if (r.rank === culprit) continue;
    assert.deepEqual(r.failures, [], r.failures.join('\n'));
    const e = errOf(r);
    assert.ok(e, `rank ${r.rank} has no error`);
    check(e, r);
    // the culprit acts after ~200 ms; everyone must be released well within a second after that
    assert.ok((r.data.elapsedMs as number) < 1500, `rank ${r.rank} was released after ${r.data.elapsedMs} ms`);
  }
}

test('a rank that throws releases the others blocked in a barrier (PeerFailedError naming it)', {
  timeout: 20_000,
}, async () => {
  const { results, world } = await runWorld(4, 'abort', { mode: 'throw', culprit: 2, expectCrash: true });
  assert.equal(world.abortInfo()?.rank, 2);
  assertReleased(results, 2, (e) => {
    assert.equal(e.name, 'PeerFailedError');
    assert.equal(e.failedRank, 2);
    assert.match(e.message, /rank 2.*boom from the culprit/);
  });
});

test('world.abort() from the main thread releases ranks blocked in allreduce', { timeout: 20_000 }, async () => {
  const { results } = await runWorld(
    3,
    'abort',
    { mode: 'main', culprit: 0, allreduce: true },
    {
      during: async (world) => {
        await new Promise((r) => setTimeout(r, 300));
        world.abort('stopped by the test');
      },
    },
  );
  assertReleased(results, 0, (e) => {
    assert.equal(e.name, 'PeerFailedError');
    assert.equal(e.failedRank, -1);
    assert.match(e.message, /main thread.*stopped by the test/);
  });
  // the late rank's call fails at once too
  const late = results[0]!;
  assert.equal(late.data.lateCall, true);
  assert.equal(errOf(late)?.name, 'PeerFailedError');
});

test('comm.abort() from a rank releases the others', { timeout: 20_000 }, async () => {
  const { results } = await runWorld(2, 'abort', { mode: 'comm', culprit: 1 });
  assertReleased(results, 1, (e) => {
    assert.equal(e.name, 'PeerFailedError');
    assert.equal(e.failedRank, 1);
    assert.match(e.message, /culprit gave up/);
  });
});

test('a wait timeout names the rank that had not arrived, and releases everyone', { timeout: 20_000 }, async () => {
  // 2 s: long enough that a worker merely slow to start on a loaded machine is not taken for the culprit
  const { results } = await runWorld(
    3,
    'abort',
    { mode: 'timeout', culprit: 1, delayMs: 3000 },
    { world: { timeoutMs: 2000 } },
  );
  const errs = results.filter((r) => r.rank !== 1).map(errOf);
  // the first rank to time out reports CommTimeoutError; others may see its abort instead
  assert.ok(
    errs.some(
      (e) => e?.name === 'CommTimeoutError' && e.missing?.includes(1) && /rank 1 had not arrived/.test(e.message),
    ),
    JSON.stringify(errs),
  );
  for (const e of errs) assert.match(e!.message, /rank 1 had not arrived/);
  for (const r of results.filter((x) => x.rank !== 1)) assert.ok((r.data.elapsedMs as number) < 5000);
  assert.equal(errOf(results[1]!)?.name, 'PeerFailedError');
});

test('mismatched collective calls are an error on every rank, naming each call', { timeout: 20_000 }, async () => {
  const { results } = await runWorld(2, 'mismatch');
  for (const r of results) {
    assert.deepEqual(r.failures, []);
    const e = errOf(r)!;
    assert.equal(e.name, 'CollectiveMismatchError');
    assert.match(e.message, /rank 0: call #0 allreduce\(length 10.*rank 1: call #0 allreduce\(length 11/);
  }
});

test('registering a non-shared buffer is an error on every rank, naming the rank', { timeout: 20_000 }, async () => {
  const { results } = await runWorld(3, 'registerNonShared');
  for (const r of results) {
    assert.deepEqual(r.failures, []);
    const e = errOf(r)!;
    assert.equal(e.name, 'ShmUsageError');
    assert.match(e.message, /rank 1's buffer .* not a SharedArrayBuffer/);
  }
});

test("a mutex makes G workers' non-atomic increments exact", { timeout: 30_000 }, async () => {
  const shared = new SharedArrayBuffer(64);
  const iters = 3000;
  for (const size of [2, 4]) {
    new Int32Array(shared).fill(0);
    const { results } = await runWorld(size, 'mutex', { iters }, { shared });
    for (const r of results) {
      assert.deepEqual(r.failures, [], r.failures.join('\n'));
      assert.equal(r.data.final, size * iters);
    }
  }
});

test('barrier: nobody leaves before everyone arrived', { timeout: 30_000 }, async () => {
  const { results } = await runWorld(4, 'barriers', { rounds: 200 });
  for (const r of results) assert.deepEqual(r.failures, [], r.failures.join('\n'));
});

test('takeStats reports time, waiting for peers, and bytes, then resets', { timeout: 20_000 }, async () => {
  const { results } = await runWorld(2, 'stats');
  for (const r of results) {
    assert.deepEqual(r.failures, []);
    const s = r.data.stats as { commMs: number; idleMs: number; bytes: number };
    assert.ok(s.bytes >= (1 << 16) * 4, `bytes ${s.bytes}`);
    assert.ok(s.commMs >= s.idleMs && s.idleMs >= 0);
    assert.deepEqual(r.data.after, { commMs: 0, idleMs: 0, bytes: 0 });
  }
  // rank 1 waited for the late rank 0
  const s1 = results[1]!.data.stats as { idleMs: number };
  assert.ok(s1.idleMs > 50, `rank 1 idleMs ${s1.idleMs}`);
});
