/** Subgroups of a world's ranks over its point-to-point calls: in-process, then over shared memory between threads. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ownedSlice, type Communicator } from '../../src/comm/communicator.ts';
import { subgroup } from '../../src/comm/subgroup.ts';
import { localGroup } from '../parallel/localGroup.ts';
import { runWorld } from './helpers.ts';

/** Integer values, so every order of summation gives the same float sum. */
const values = (n: number, who: number) => Float32Array.from({ length: n }, (_, j) => ((j * 7 + who * 13) % 23) - 11);

/** want += x, elementwise. */
const addInto = (want: Float32Array, x: Float32Array) => {
  for (let j = 0; j < x.length; j++) want[j] = want[j]! + x[j]!;
};

/** Runs `body` on the members of `ranks` (each its own subgroup object) of a world of `size`. */
async function onGroup<T>(size: number, ranks: number[], body: (g: Communicator) => Promise<T>): Promise<T[]> {
  const world = localGroup(size);
  return Promise.all(ranks.map((r) => body(subgroup(world[r]!, ranks, 100))));
}

test('a subgroup all-reduces, reduce-scatters and all-gathers over its members only, in its own rank order', async () => {
  for (const ranks of [[3, 1], [0, 2, 3], [4, 0, 2, 1, 3], [2]]) {
    for (const n of [1, 5, 64, 1001]) {
      const want = new Float32Array(n);
      for (const r of ranks) addInto(want, values(n, r));
      const sums = await onGroup(5, ranks, async (g) => {
        const buf = values(n, ranks[g.rank]!);
        await g.allreduce(buf);
        return buf;
      });
      for (const s of sums) assert.deepEqual(s, want, `allreduce over [${ranks}] n=${n}`);
      const means = await onGroup(5, ranks, async (g) => {
        const buf = values(n, ranks[g.rank]!);
        const own = await g.reduceScatter(buf, 'mean');
        assert.deepEqual(own, ownedSlice(n, ranks.length, g.rank));
        return buf.slice(own.start, own.end);
      });
      const mean = want.map((v) => v / ranks.length);
      means.forEach((m, i) => {
        const { start, end } = ownedSlice(n, ranks.length, i);
        assert.deepEqual(m, mean.subarray(start, end), `reduceScatter's slice ${i} over [${ranks}] n=${n}`);
      });
      const gathered = await onGroup(5, ranks, async (g) => {
        const buf = new Float32Array(n);
        const { start, end } = ownedSlice(n, ranks.length, g.rank);
        buf.set(values(n, 9).subarray(start, end), start);
        await g.allgather(buf);
        return buf;
      });
      for (const b of gathered) assert.deepEqual(b, values(n, 9), `allgather over [${ranks}] n=${n}`);
    }
  }
});

test('calls made before the last ended run in turn; broadcast, barrier and tagged messages reach the members', async () => {
  const ranks = [1, 3, 0];
  const out = await onGroup(4, ranks, async (g) => {
    const a = values(40, g.rank),
      b = values(17, g.rank + 5);
    await Promise.all([g.allreduce(a), g.allreduce(b, 'mean'), g.barrier()]);
    const root = g.rank === 2 ? values(9, 77) : new Float32Array(9);
    await g.broadcast(root, 2);
    const msg = new Float32Array(3);
    if (g.rank === 0) await g.send(Float32Array.of(1, 2, 3), 2, 4);
    if (g.rank === 2) await g.recv(msg, 0, 4);
    return { a, b, root, msg };
  });
  const wantA = new Float32Array(40);
  const wantB = new Float32Array(17);
  for (let m = 0; m < 3; m++) {
    addInto(wantA, values(40, m));
    addInto(wantB, values(17, m + 5));
  }
  for (const o of out) {
    assert.deepEqual(o.a, wantA);
    assert.deepEqual(
      o.b,
      wantB.map((v) => v / 3),
    );
    assert.deepEqual(o.root, values(9, 77));
  }
  assert.deepEqual(out[2]!.msg, Float32Array.of(1, 2, 3));
});

test('a subgroup names the rank that cannot be in it', async () => {
  const world = localGroup(3);
  assert.throws(() => subgroup(world[0]!, [0, 3], 0), /rank 3 is not a rank of the world of 3/);
  assert.throws(() => subgroup(world[0]!, [0, 1, 0], 0), /repeat a rank/);
  assert.throws(() => subgroup(world[0]!, [1, 2], 0), /rank 0 builds a group of ranks \[1, 2\] it is not in/);
  await assert.rejects(
    subgroup(world[0]!, [0, 1], 0).send(new Float32Array(1), 2),
    /send destination 2 is not a member/,
  );
});

test('subgroups over shared memory between threads: even/odd pairs and an odd ring, messages past a mailbox', async () => {
  const { results } = await runWorld(4, 'subgroups', { sizes: [1, 333, 20_001] }, { world: { mailboxBytes: 4096 } });
  for (const r of results) assert.ok(r.ok, r.failures.join('\n'));
});
