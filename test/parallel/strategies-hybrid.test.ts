import { test } from 'node:test';
import assert from 'node:assert/strict';
import { hybridStrategy } from '../../src/parallel/strategies/hybrid.ts';
import { localGroup } from './localGroup.ts';
import { sgdReplica, stepInfo } from './strategyHarness.ts';
import { assertClose } from '../util/close.ts';

/** Each rank's gradient per step (already scaled so that the mean over ranks is the global batch's). */
const GRADS = [
  [
    [1, 2, 3, 4, 5],
    [3, 2, 1, 0, -1],
    [-1, 5, 2, 2, 8],
  ],
  [
    [0, 1, 0, 1, 0],
    [2, 2, 2, 2, 2],
    [4, -3, 1, 0, 1],
  ],
];

async function run(bucketBytes: number, readyOffsets: number[]) {
  const comms = localGroup(3);
  // different starting points: hybrid must start every replica from rank 0's
  const replicas = [
    sgdReplica([1, 1, 1, 1, 1], [7]),
    sgdReplica([9, 9, 9, 9, 9], [8]),
    sgdReplica([5, 4, 3, 2, 1], [9]),
  ];
  const strategies = comms.map((c) => hybridStrategy(c, bucketBytes));
  await Promise.all(strategies.map((s, r) => s.onStart!(replicas[r]!)));
  const after: number[][][] = [];
  for (const [step, grads] of GRADS.entries()) {
    for (const [r, rep] of replicas.entries()) rep.grads.set(grads[r]!);
    // backward finishes the last layers first: every rank reports the same offsets in the same order
    for (const offset of readyOffsets) {
      for (const [r, s] of strategies.entries()) s.onGradientsReady!(replicas[r]!, offset);
    }
    await Promise.all(strategies.map((s, r) => s.applyUpdate!(replicas[r]!, stepInfo(step, 0.5))));
    after.push(replicas.map((rep) => [...rep.params]));
  }
  return { replicas, after };
}

/** w ← w − lr · mean over ranks of the gradient: one step of one device on the global batch. */
function expected(): number[][] {
  let w = [1, 1, 1, 1, 1];
  const out: number[][] = [];
  for (const grads of GRADS) {
    w = w.map((x, i) => x - (0.5 * (grads[0]![i]! + grads[1]![i]! + grads[2]![i]!)) / 3);
    out.push(w);
  }
  return out;
}

test('hybrid: every replica starts from rank 0 and takes one step on the mean gradient (gradient buckets reduced during backward)', async () => {
  // 2-float buckets: grads[3:5] and grads[1:3] during backward, grads[0:1] after it
  const { replicas, after } = await run(8, [3, 1]);
  const want = expected();
  // step 1: 1 − 0.5·(1+3−1)/3 = 0.5, 1 − 0.5·(2+2+5)/3 = −0.5, …
  assertClose(want[0]!, [0.5, -0.5, 0, 0, -1], { what: 'hand computation' });
  for (const [step, ws] of after.entries())
    for (const w of ws) assertClose(w, want[step]!, { what: `weights after step ${step + 1}` });
  for (const r of replicas) {
    assert.deepEqual([...r.state], [7], "BatchNorm state is rank 0's");
    assertClose(r.grads, [2, 0, 1, 1, 1], { what: 'the reduced gradient (mean of the last step)' });
    assert.equal(r.localSteps, 2);
  }
});

test('hybrid: one bucket after backward (bucket larger than the gradient) gives the same step', async () => {
  const { after } = await run(1 << 20, [3, 1]);
  const want = expected();
  for (const [step, ws] of after.entries())
    for (const w of ws) assertClose(w, want[step]!, { what: `weights after step ${step + 1}` });
});

test('hybrid: without any onGradientsReady call the whole gradient is reduced after backward', async () => {
  const { after } = await run(8, []);
  const want = expected();
  for (const [step, ws] of after.entries())
    for (const w of ws) assertClose(w, want[step]!, { what: `weights after step ${step + 1}` });
});
