/**
 * Hybrid's gradient buckets overlap backward over TCP (comm/overlap.ts): while a bucket is in
 * flight, backward yields a turn of the event loop after each layer with parameters, so the ring
 * moves between layers. Ranks are TcpCommunicators of one process on loopback, so a rank's
 * backward and its peers' calls share one event loop: a peer's bucket can only complete while
 * backward runs if backward yields. And the overlapped run gives the same bits as the run whose
 * buckets wait for backward to end (the transport's background progress hidden from hybrid).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { tcpWorld } from './tcpInProcess.ts';
import { backgroundCollectives } from '../../src/comm/overlap.ts';
import { hybridStrategy } from '../../src/parallel/strategies/hybrid.ts';
import { device, LAYERS, model, step, withoutOverlap } from './overlapSteps.ts';

const world = (size: number) => tcpWorld(size, 'overlap-test-secret');

test('a bucket in flight over TCP moves while backward runs (its peer completes it before backward ends)', async () => {
  const comms = await world(2);
  try {
    assert.ok(backgroundCollectives(comms[0]!), 'TcpCommunicator progresses in the background');
    const models = [model(), model()];
    // every layer's gradient is a bucket of its own
    const strategies = comms.map((c) => hybridStrategy(c, 4));
    await Promise.all(strategies.map((s, r) => s.onStart!(device(models[r]!))));
    // the peer announces every offset at once (as a device without samples) and notes when its first bucket is in
    let peerFirstDone = false;
    const peer = (async () => {
      const view = device(models[1]!);
      const offsets = models[1]!.gradientReadyOffsets;
      const first = comms[1]!.allreduce.bind(comms[1]!);
      let calls = 0;
      comms[1]!.allreduce = (buf, op) => {
        const p = first(buf, op);
        if (calls++ === 0) void p.then(() => (peerFirstDone = true));
        return p;
      };
      for (const offset of offsets) void strategies[1]!.onGradientsReady!(view, offset);
      await strategies[1]!.applyUpdate!(view, { step: 0, epoch: 0, lr: 0.1, samples: 0 });
    })();
    // what rank 0's backward sees of it, layer by layer
    const seen: boolean[] = [];
    await Promise.all([step(models[0]!, strategies[0]!, 0, 0, () => seen.push(peerFirstDone)), peer]);
    assert.equal(seen.length, LAYERS);
    // the first bucket starts at the first layer's report: the ring must have moved before the last one
    assert.ok(
      seen.slice(0, -1).some((done) => done),
      `the peer's first bucket completed only after backward ended (seen: ${seen.join(',')})`,
    );
  } finally {
    await Promise.all(comms.map((c) => c.close()));
  }
});

test('hybrid over TCP with overlap gives the same bits as with its buckets after backward (3 ranks, 3 steps)', async () => {
  const comms = await world(3);
  try {
    const run = async (overlap: boolean): Promise<Float32Array[]> => {
      const models = comms.map(() => model());
      const strategies = comms.map((c) => hybridStrategy(overlap ? c : withoutOverlap(c), 1024));
      await Promise.all(strategies.map((s, r) => s.onStart!(device(models[r]!))));
      for (let k = 0; k < 3; k++) await Promise.all(models.map((m, r) => step(m, strategies[r]!, r, k)));
      return models.map((m) => Float32Array.from(m.params));
    };
    const after = await run(false);
    const overlapped = await run(true);
    for (const [r, params] of overlapped.entries()) {
      assert.deepEqual(
        new Uint32Array(params.buffer),
        new Uint32Array(after[r]!.buffer),
        `rank ${r}: overlapped weights differ in their bits`,
      );
    }
    // every replica holds the same weights, and training moved them
    assert.deepEqual(new Uint32Array(overlapped[1]!.buffer), new Uint32Array(overlapped[0]!.buffer));
    const initial = model().params;
    assert.ok(overlapped[0]!.some((w, i) => w !== initial[i]));
  } finally {
    await Promise.all(comms.map((c) => c.close()));
  }
});
