/**
 * Hybrid's buckets in the simulator as paratrain runs them: over TCP between one-device processes
 * they overlap backward (each starts when backward has passed it and the link is free); on one
 * host they follow it (shared memory reduces each inline); with several devices per host on
 * several hosts each bucket's reduce-scatter inside the host runs in line, its slice crosses the
 * link during backward and the allgathers follow backward (comm/hierarchical.ts); `ideal` overlaps
 * on every placement. Checked on a two-layer model whose timeline is worked out by hand.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { allreduce, hierarchicalParts, type Network, type Placement } from '../../src/simulate/costModel.ts';
import { bucketsOverlap, gradientBuckets, hybridPlan } from '../../src/simulate/lockstep.ts';
import type { LayerCost, ModelCosts } from '../../src/simulate/layerCosts.ts';
import { parseLink } from '../../src/simulate/units.ts';

const close = (a: number, b: number) => assert.ok(Math.abs(a - b) <= 1e-9 * Math.max(1, Math.abs(b)), `${a} ≠ ${b}`);

function layer(index: number, paramOffset: number, paramFloats: number, backward: number): LayerCost {
  return {
    index,
    type: 'dense',
    name: `layers.${index}`,
    forward: { fixed: 0, perSample: 0 },
    backward: { fixed: backward, perSample: 0 },
    paramOffset,
    paramFloats,
    inputShape: [1],
    outputShape: [1],
    outputElements: 1,
    flopsPerSample: 1,
  };
}

/** layer 0: 250k floats, 1 s of backward; layer 1 (backward first): 500k floats, 0.1 s */
const COSTS: ModelCosts = {
  layers: [layer(0, 0, 250_000, 1), layer(1, 250_000, 500_000, 0.1)],
  paramFloats: 750_000,
  stateFloats: 0,
  optimizerPerFloat: 0,
  source: 'by hand',
};
const NET: Network = { tcp: { link: parseLink('100mbit:2ms') }, shm: { alpha: 5e-6, beta: 16e9 } };

test('the buckets: layer 1 when backward has passed it, the rest (offset 0) when backward ends', () => {
  assert.deepEqual(gradientBuckets(COSTS, 1, 1 << 20), [
    { floats: 500_000, ready: 0.1 },
    { floats: 250_000, ready: 1.1 },
  ]);
});

test('implemented: overlapped over TCP with one device per host, serial on one host; ideal: overlapped always', () => {
  const tail = (p: Placement, overlap: 'implemented' | 'ideal') => {
    const plan = hybridPlan(COSTS, 1, 1 << 20, p, NET, overlap);
    close(plan.compute, 1.1);
    return plan.tail(1);
  };
  const cost = (floats: number, p: Placement) => allreduce(floats * 4, p, NET).seconds;
  const tcp = { hosts: 2, perHost: 1 },
    threads = { hosts: 1, perHost: 2 },
    both = { hosts: 2, perHost: 2 };
  // the first bucket's 2 MB over 100 Mbit/s take less than the 1 s of layer 0's backward
  assert.ok(cost(500_000, tcp) < 1);
  // overlapped: layer 1's bucket is done within backward, only the last one follows it
  close(tail(tcp, 'implemented'), cost(250_000, tcp));
  close(tail(tcp, 'ideal'), cost(250_000, tcp));
  // serial: both buckets after (inline within) backward
  close(tail(threads, 'implemented'), cost(500_000, threads) + cost(250_000, threads));
  close(tail(both, 'ideal'), cost(250_000, both));
  assert.equal(bucketsOverlap('implemented', tcp), true);
  assert.equal(bucketsOverlap('implemented', both), true);
  assert.equal(bucketsOverlap('implemented', threads), false);
  assert.equal(bucketsOverlap('ideal', threads), true);
});

test('implemented, 2 hosts × 2 devices: the reduce-scatters in line, the slices across during backward, the allgathers after it', () => {
  const both = { hosts: 2, perHost: 2 };
  for (const link of ['100mbit:2ms', '10mbit:2ms']) {
    const net: Network = { ...NET, tcp: { link: parseLink(link) } };
    const b1 = hierarchicalParts(500_000 * 4, both, net),
      b0 = hierarchicalParts(250_000 * 4, both, net);
    // layer 1's bucket: scattered at 0.1 s (delaying backward by its scatter), across the link from then
    const crossed = 0.1 + b1.scatter.seconds + b1.cross.seconds;
    const backwardEnd = 1.1 + b1.scatter.seconds;
    // its allgather once backward has ended and its slice is back, then the last bucket's three parts
    const end =
      Math.max(backwardEnd, crossed) + b1.gather.seconds + b0.scatter.seconds + b0.cross.seconds + b0.gather.seconds;
    close(hybridPlan(COSTS, 1, 1 << 20, both, net, 'implemented').tail(1), end - 1.1);
    if (link === '100mbit:2ms') assert.ok(crossed < backwardEnd, 'the first slice is back within backward');
    else assert.ok(crossed > backwardEnd, 'the first slice comes back after backward');
  }
});
