/**
 * Which layouts of pipelines and tensor-parallel groups a job of several processes can run: devices
 * of different processes send to each other only at the same thread index (comm/hierarchical.ts),
 * so a pipeline needs as many devices per process as stages, or one; a tensor-parallel group as
 * many as its size, or one. The others are refused before the run, naming the pair and the fix.
 * (The layouts that work, trained: multiprocess-pipeline.test.ts.)
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parseConfig } from '../../src/config/index.ts';
import { jobShapeOf } from '../../src/runtime/job/jobShape.ts';
import { checkLinks, pipelinePairs, tensorGroupPairs } from '../../src/runtime/run/linkChecks.ts';
import { directLink, HierarchicalCommunicator } from '../../src/comm/hierarchical.ts';
import type { Communicator } from '../../src/comm/communicator.ts';

const layers = (parallel: 'data' | 'model') => [
  { dense: { units: 8, activation: 'relu', parallel } },
  { dense: { units: 8, activation: 'relu', parallel } },
  { dense: { units: 3 } },
];
const config = (threads: number, train: Record<string, unknown>) =>
  parseConfig(
    {
      model: { input: [4], layers: layers(train.tensorParallel ? 'model' : 'data') },
      train: { devices: threads, strategy: 'hybrid', ...train },
    },
    'links.yaml',
  );
const pipeline = (stages: number) => ({ pipeline: { stages } });
const tensorParallel = (g: number) => ({ tensorParallel: g });

test('pipelines across processes: one pipeline per process, or one device per process', () => {
  for (const [processes, threads, stages] of [
    [2, 1, 2],
    [3, 1, 3],
    [4, 1, 2],
    [2, 2, 2],
    [3, 3, 3],
    [1, 4, 2],
  ] as const)
    assert.doesNotThrow(
      () => checkLinks(config(threads, pipeline(stages)), jobShapeOf(threads, { rank: 0, worldSize: processes })),
      `${processes} × ${threads}, ${stages} stages`,
    );
  assert.throws(
    () => checkLinks(config(4, pipeline(2)), jobShapeOf(4, { rank: 1, worldSize: 2 })),
    /^Error: train\.pipeline: 2 stages on 2 processes × 4 devices needs device 2 \(process 0, thread 2\) and device 4 \(process 1, thread 0\) to exchange messages \(stage 0's data-parallel group\), but devices of different processes reach each other only at the same thread index; use --devices 2 \(train\.devices: 2, one pipeline per process\) or --devices 1 \(one device per process\), or run one process$/,
  );
});

test('tensor-parallel groups across processes: one group per process, or one device per process', () => {
  for (const [processes, threads, g] of [
    [2, 2, 2],
    [2, 4, 4],
    [4, 1, 2],
    [2, 1, 2],
    [2, 4, 8],
    [1, 4, 2],
  ] as const)
    assert.doesNotThrow(
      () => checkLinks(config(threads, tensorParallel(g)), jobShapeOf(threads, { rank: 0, worldSize: processes })),
      `${processes} × ${threads}, groups of ${g}`,
    );
  assert.throws(
    () => checkLinks(config(4, tensorParallel(2)), jobShapeOf(4, { rank: 0, worldSize: 2 })),
    /^Error: train\.tensorParallel: groups of 2 devices on 2 processes × 4 devices needs device 2 \(process 0, thread 2\) and device 4 \(process 1, thread 0\) to exchange messages \(the devices holding shard 0\), .*use --devices 2 \(train\.devices: 2, one group per process\) or --devices 1/,
  );
});

test('the pairs a layout needs are the ones its messages take', async () => {
  const key = (p: { a: number; b: number }) => [p.a, p.b].sort().join('-');
  // 2 pipelines of 3: neighbours, the gather on device 0, and each stage's pair of devices
  assert.deepEqual(
    [...new Set(pipelinePairs(6, 3).map(key))].sort(),
    ['0-1', '1-2', '3-4', '4-5', '0-2', '0-3', '1-4', '2-5'].sort(),
  );
  // groups of 2 on 4 devices: the groups, and the holders of each shard
  assert.deepEqual([...new Set(tensorGroupPairs(4, 2).map(key))].sort(), ['0-1', '2-3', '0-2', '1-3'].sort());
  // the rule is the hierarchical communicator's own: it sends over exactly the pairs directLink accepts
  const stub = (rank: number, size: number): Communicator =>
    ({ rank, size, send: async () => {}, recv: async () => {} }) as unknown as Communicator;
  for (let me = 0; me < 6; me++) {
    const world = new HierarchicalCommunicator(stub(me % 3, 3), stub(Math.floor(me / 3), 2));
    for (let peer = 0; peer < 6; peer++) {
      if (peer === me) continue;
      const sent = await world.send(new Float32Array(1), peer).then(
        () => true,
        () => false,
      );
      assert.equal(sent, directLink(me, peer, 3), `${me} → ${peer}`);
    }
  }
});
