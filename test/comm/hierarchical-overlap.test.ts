/**
 * The hierarchical allreduce overlaps backward where its cross transport does (comm/hierarchical.ts):
 * issued while the caller computes, an allreduce reduce-scatters inside the process at once,
 * leaves its slice's cross-process allreduce in flight and defers its allgather inside the
 * process until the caller stops computing, when the deferred allgathers run in issue order.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { Communicator } from '../../src/comm/communicator.ts';
import { HierarchicalCommunicator } from '../../src/comm/hierarchical.ts';
import { backgroundCollectives } from '../../src/comm/overlap.ts';
import { tcpWorld } from './tcpInProcess.ts';
import { hybridStrategy } from '../../src/parallel/strategies/hybrid.ts';
import { localGroup } from '../parallel/localGroup.ts';
import { device, LAYERS, model, step, withoutOverlap } from './overlapSteps.ts';

/** P processes × L threads in this thread: local groups in memory, `cross[ℓ][p]` joining thread ℓ of every process. */
function hierarchical(P: number, L: number, cross: Communicator[][]): HierarchicalCommunicator[] {
  const locals = Array.from({ length: P }, () => localGroup(L));
  const out: HierarchicalCommunicator[] = [];
  for (let p = 0; p < P; p++)
    for (let l = 0; l < L; l++) out.push(new HierarchicalCommunicator(locals[p]![l]!, cross[l]![p]!));
  return out;
}

/** An in-memory cross world that says it progresses in the background, as TCP and MPI do. */
function backgroundGroup(size: number): Communicator[] {
  return localGroup(size).map((c) => Object.assign(c, { progressesInBackground: true as const, computing() {} }));
}

const turn = () => new Promise<void>((resolve) => setImmediate(resolve));

test('a hierarchical communicator progresses in the background exactly where its cross transport does', () => {
  assert.ok(backgroundCollectives(hierarchical(2, 2, [backgroundGroup(2), backgroundGroup(2)])[0]!));
  assert.equal(backgroundCollectives(hierarchical(2, 2, [localGroup(2), localGroup(2)])[0]!), null);
});

test('allgathers wait for the caller to stop computing, then run in issue order, whenever each thread’s slice came back', async () => {
  // process 0's two threads see their cross calls end at different moments: thread 1's world waits
  // for process 1's thread 1, which issues its buckets late. Gathering as each slice comes back would
  // call thread 0's allgather where thread 1 calls its next reduce-scatter (the local group refuses that).
  const comms = hierarchical(2, 2, [backgroundGroup(2), backgroundGroup(2)]);
  const n = 10;
  const input = (rank: number, b: number) => Float32Array.from({ length: n }, (_, i) => rank * 100 + b * 10 + i);
  const bufs = comms.map((c) => [input(c.rank, 0), input(c.rank, 1)]);
  for (const c of comms) c.computing(true);
  const done: Promise<void>[] = [];
  let gathered = 0;
  const issue = (r: number, b: number) => {
    const p = comms[r]!.allreduce(bufs[r]![b]!, 'mean');
    done.push(p);
    void p.then(() => gathered++);
  };
  for (const r of [0, 1, 2]) issue(r, 0);
  await turn();
  for (const r of [0, 1, 2]) issue(r, 1);
  await turn();
  issue(3, 0);
  await turn();
  issue(3, 1);
  for (let k = 0; k < 5; k++) await turn();
  assert.equal(gathered, 0, 'no allgather runs while the callers compute');
  for (const c of comms) c.computing(false);
  await Promise.all(done);
  for (const b of [0, 1]) {
    const expect = Float32Array.from(
      { length: n },
      (_, i) => [0, 1, 2, 3].reduce((s, r) => s + input(r, b)[i]!, 0) / 4,
    );
    for (const [r, rank] of bufs.entries()) assert.deepEqual(rank[b], expect, `rank ${r}, bucket ${b}`);
  }
});

test('a collective issued after computing stops waits for the deferred allgathers (2 × 2)', async () => {
  const comms = hierarchical(2, 2, [backgroundGroup(2), backgroundGroup(2)]);
  const bucket = comms.map((c) => Float32Array.from({ length: 7 }, (_, i) => c.rank + i));
  const flag = comms.map((c) => Float32Array.of(c.rank));
  for (const c of comms) c.computing(true);
  const first = comms.map((c, r) => c.allreduce(bucket[r]!, 'sum'));
  for (const c of comms) c.computing(false);
  const second = comms.map((c, r) => c.allreduce(flag[r]!, 'sum'));
  await Promise.all([...first, ...second]);
  for (const r of [0, 1, 2, 3]) {
    assert.deepEqual(
      bucket[r],
      Float32Array.from({ length: 7 }, (_, i) => 6 + 4 * i),
    );
    assert.deepEqual(flag[r], Float32Array.of(6));
  }
});

test('hybrid on 2 processes × 2 threads over TCP: the slices cross while backward runs, and the bits equal the run without overlap', async () => {
  const cross = [await tcpWorld(2, 'hierarchical-overlap-secret'), await tcpWorld(2, 'hierarchical-overlap-secret')];
  try {
    const run = async (overlap: boolean): Promise<{ params: Float32Array[]; seen: boolean[] }> => {
      const comms = hierarchical(2, 2, cross);
      const models = comms.map(() => model());
      let crossDone = 0;
      for (const world of cross)
        for (const c of world) {
          const original = c.allreduce.bind(c);
          c.allreduce = (buf, op) => {
            const p = original(buf, op);
            void p.then(() => crossDone++);
            return p;
          };
        }
      // every layer's gradient a bucket of its own
      const strategies = comms.map((c) => hybridStrategy(overlap ? c : withoutOverlap(c), 4));
      await Promise.all(strategies.map((s, r) => s.onStart!(device(models[r]!))));
      const seen: boolean[] = [];
      for (let k = 0; k < 3; k++) {
        await Promise.all(
          models.map((m, r) => step(m, strategies[r]!, r, k, r === 0 ? () => seen.push(crossDone > 0) : undefined)),
        );
        crossDone = 0;
      }
      for (const world of cross) for (const c of world) delete (c as Partial<Communicator>).allreduce;
      return { params: models.map((m) => Float32Array.from(m.params)), seen };
    };
    const after = await run(false);
    const overlapped = await run(true);
    assert.equal(overlapped.seen.length, 3 * LAYERS);
    // rank 0's first bucket starts at its first layer's report: some slice must have crossed before the last
    assert.ok(
      overlapped.seen.slice(0, LAYERS - 1).some((d) => d),
      `no slice crossed before backward ended (seen: ${overlapped.seen.join(',')})`,
    );
    for (const [r, params] of overlapped.params.entries()) {
      assert.deepEqual(
        new Uint32Array(params.buffer),
        new Uint32Array(after.params[r]!.buffer),
        `rank ${r}: overlapped weights differ in their bits`,
      );
    }
    assert.deepEqual(new Uint32Array(overlapped.params[3]!.buffer), new Uint32Array(overlapped.params[0]!.buffer));
    assert.ok(overlapped.params[0]!.some((w, i) => w !== model().params[i]));
  } finally {
    await Promise.all(cross.flat().map((c) => c.close()));
  }
});
