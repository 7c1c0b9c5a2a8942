import { test } from 'node:test';
import assert from 'node:assert/strict';
import { HierarchicalCommunicator } from '../../src/comm/hierarchical.ts';
import { ownedSlice } from '../../src/comm/communicator.ts';
import { localGroup } from '../parallel/localGroup.ts';

/** P processes × L threads, all in this thread: one local group per process, one cross group per thread index. */
function world(P: number, L: number): HierarchicalCommunicator[] {
  const locals = Array.from({ length: P }, () => localGroup(L));
  const crosses = Array.from({ length: L }, () => localGroup(P));
  const out: HierarchicalCommunicator[] = [];
  for (let p = 0; p < P; p++)
    for (let l = 0; l < L; l++) out.push(new HierarchicalCommunicator(locals[p]![l]!, crosses[l]![p]!));
  return out;
}

const input = (rank: number, n: number) =>
  Float32Array.from({ length: n }, (_, i) => Math.sin(rank * 7.1 + i * 0.37) * (rank + 1));

for (const [P, L] of [
  [2, 2],
  [3, 2],
  [2, 3],
  [1, 4],
  [4, 1],
] as const) {
  test(`hierarchical ${P} processes × ${L} threads: ranks, allreduce, allgather, broadcast, barrier against a serial reference`, async () => {
    const comms = world(P, L),
      G = P * L;
    assert.deepEqual(
      comms.map((c) => c.rank),
      Array.from({ length: G }, (_, r) => r),
    );
    assert.ok(comms.every((c) => c.size === G));
    for (const n of [1, 5, 37, 1000]) {
      for (const op of ['sum', 'mean'] as const) {
        const bufs = comms.map((c) => input(c.rank, n));
        const expect = new Float32Array(n);
        for (let i = 0; i < n; i++) {
          let s = 0;
          for (let r = 0; r < G; r++) s += input(r, n)[i]!;
          expect[i] = op === 'mean' ? s / G : s;
        }
        await Promise.all(comms.map((c, r) => c.allreduce(bufs[r]!, op)));
        for (let r = 0; r < G; r++) {
          assert.deepEqual(bufs[r], bufs[0], `rank ${r} differs from rank 0 (results must be bit-identical)`);
          for (let i = 0; i < n; i++)
            assert.ok(Math.abs(bufs[r]![i]! - expect[i]!) <= 1e-5 * (1 + Math.abs(expect[i]!)), `n=${n} ${op} [${i}]`);
        }
      }
      const gathered = comms.map((c) => input(c.rank, n));
      await Promise.all(comms.map((c, r) => c.allgather(gathered[r]!)));
      for (let r = 0; r < G; r++) {
        for (let owner = 0; owner < G; owner++) {
          const { start, end } = ownedSlice(n, G, owner);
          assert.deepEqual(gathered[r]!.subarray(start, end), input(owner, n).subarray(start, end));
        }
      }
      for (const root of [0, G - 1, Math.floor(G / 2)]) {
        const b = comms.map((c) => input(c.rank + 100, n));
        await Promise.all(comms.map((c, r) => c.broadcast(b[r]!, root)));
        for (let r = 0; r < G; r++) assert.deepEqual(b[r], input(root + 100, n));
      }
    }
    await Promise.all(comms.map((c) => c.barrier()));
  });
}

test('hierarchical reduceScatter returns the global owned slice holding the reduced values', async () => {
  const comms = world(2, 2),
    n = 11;
  const bufs = comms.map((c) => input(c.rank, n));
  const slices = await Promise.all(comms.map((c, r) => c.reduceScatter(bufs[r]!, 'sum')));
  for (let r = 0; r < 4; r++) {
    assert.deepEqual(slices[r], ownedSlice(n, 4, r));
    for (let i = slices[r]!.start; i < slices[r]!.end; i++) {
      const s = [0, 1, 2, 3].reduce((a, q) => a + input(q, n)[i]!, 0);
      assert.ok(Math.abs(bufs[r]![i]! - s) < 1e-5 * (1 + Math.abs(s)));
    }
  }
});

test('point-to-point between threads of different index in different processes is refused with the route', async () => {
  const comms = world(2, 2);
  await assert.rejects(
    comms[0]!.send(new Float32Array(1), 3),
    /rank 0 \(process 0, thread 0\) has no direct link to rank 3 \(process 1, thread 1\)/,
  );
});
