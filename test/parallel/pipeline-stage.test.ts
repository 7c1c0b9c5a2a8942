import { test } from 'node:test';
import assert from 'node:assert/strict';
import { jsBackend } from '../../src/kernels/js/index.ts';
import { randomArray } from '../util/close.ts';
import { stageOps } from '../../src/parallel/pipeline/schedule.ts';
import type { OpTiming } from '../../src/parallel/pipeline/stageStep.ts';
import { config, pipelinedRun, unsplitRun, type Batch, type RunOutcome } from './pipelineHarness.ts';

// Exact equality: every stage runs the unsplit model's layers on the same micro-batches with the
// same dropout offsets, and accumulates its gradients in the same micro-batch order; Adam is elementwise.
const N = 13,
  M = 5,
  STEPS = 3;

const mlp = config({
  model: {
    input: [6],
    layers: [
      { dense: { units: 16, activation: 'relu', useBias: true } },
      { dropout: { rate: 0.3 } },
      { dense: { units: 12, activation: 'tanh', useBias: true } },
      // per micro-batch statistics, the running ones updated in micro-batch order: as train.microBatches does
      { batchNorm: {} },
      { dense: { units: 10, activation: 'relu', useBias: true } },
      { dropout: { rate: 0.2, masks: 'per-sample' } },
      { dense: { units: 4, useBias: true } },
    ],
  },
  loss: 'softmaxCrossEntropy',
  optimizer: { adam: { lr: 0.01 } },
  train: { seed: 11 },
});

const FRAMES = 6,
  VOCAB = 11;
const transformer = config({
  model: {
    input: [FRAMES],
    layers: [
      { embedding: { vocab: VOCAB, dim: 8 } },
      { positionEncoding: { encoding: 'learned' } },
      { transformerBlock: { heads: 2, dropout: 0.1 } },
      { transformerBlock: { heads: 2, dropout: 0.1 } },
      { layerNorm: {} },
      { dense: { units: VOCAB } },
    ],
  },
  loss: 'tokenCrossEntropy',
  optimizer: { adamw: { lr: 0.01, weightDecay: 0.1 } },
  train: { seed: 3 },
});

const mlpBatches: Batch[] = Array.from({ length: STEPS }, (_, s) => ({
  samples: N,
  x: randomArray(N * 6, 10 + s),
  labels: Int32Array.from({ length: N }, (_, i) => (i * 3 + s) % 4),
}));
const tokenBatches: Batch[] = Array.from({ length: STEPS }, (_, s) => ({
  samples: N,
  x: Float32Array.from({ length: N * FRAMES }, (_, i) => (i * 7 + s * 5) % VOCAB),
  labels: Int32Array.from({ length: N * FRAMES }, (_, i) => (i * 5 + s) % VOCAB),
}));

function assertSame(what: string, got: RunOutcome, want: RunOutcome): void {
  assert.deepEqual(got.losses, want.losses, `${what}: losses`);
  assert.deepEqual([...got.firstGrads.keys()].sort(), [...want.firstGrads.keys()].sort(), `${what}: tensors`);
  for (const [name, g] of want.firstGrads)
    assert.deepEqual(got.firstGrads.get(name), g, `${what}: gradient of ${name}`);
  assert.equal(got.finalParams.size, want.finalParams.size);
  for (const [name, w] of want.finalParams)
    assert.deepEqual(got.finalParams.get(name), w, `${what}: ${name} after ${STEPS} steps`);
}

for (const [name, c, batches] of [
  ['MLP with dropout and BatchNorm', mlp, mlpBatches],
  ['transformer with dropout', transformer, tokenBatches],
] as const) {
  test(`pipelined ${name}: gpipe and 1f1b on 2 and 4 stages equal the unsplit micro-batched run bit for bit`, async () => {
    const want = await unsplitRun(jsBackend, c, batches, M);
    // a step that draws no dropout mask would make the test blind to the offsets: check the masks matter
    const other = await unsplitRun(jsBackend, { ...c, train: { ...c.train, seed: c.train.seed + 1 } }, batches, M);
    assert.notDeepEqual(other.losses, want.losses);
    for (const p of [2, 4])
      for (const schedule of ['gpipe', '1f1b'] as const) {
        assertSame(`${schedule} p ${p}`, await pipelinedRun(jsBackend, c, batches, M, p, schedule), want);
        const ahead = await pipelinedRun(jsBackend, c, batches, M, p, schedule, undefined, true);
        assertSame(`${schedule} p ${p}, sends ahead of receives`, ahead, want);
      }
  });
}

test("1f1b's odd stages send ahead of the receive before it where the transport takes the send at once", async () => {
  const p = 4,
    m = 6,
    batches = mlpBatches.slice(0, 1);
  const order = async (sendAhead: boolean) => {
    const timings = Array.from({ length: p }, (): OpTiming[] => []);
    await pipelinedRun(jsBackend, mlp, batches, m, p, '1f1b', timings, sendAhead);
    return timings.map((ops) => ops.map((o) => `${o.kind} ${o.micro}`));
  };
  const scheduled = await order(false),
    ahead = await order(true);
  for (let s = 0; s < p; s++) {
    const ops = stageOps('1f1b', p, m, s).map((o) => `${o.kind} ${o.micro}`);
    assert.deepEqual(scheduled[s], ops, `stage ${s} runs its schedule`);
    // every send the schedule puts right after a receive comes right before it instead; all else in place
    const moved = [...ops];
    for (let i = 0; i + 1 < moved.length; i++)
      if (moved[i]!.startsWith('recv') && moved[i + 1]!.startsWith('send')) {
        [moved[i], moved[i + 1]] = [moved[i + 1]!, moved[i]!];
        i++;
      }
    assert.deepEqual(ahead[s], moved, `stage ${s} sends ahead`);
    assert.equal(moved.join() !== ops.join(), s % 2 === 1, `stage ${s}: only odd stages have a receive then a send`);
  }
});

test('1f1b holds fewer activations than gpipe: stage s at most min(p − s, m) micro-batches of m', async () => {
  const batches = mlpBatches
    .slice(0, 1)
    .map((b) => ({ ...b, samples: 16, x: randomArray(16 * 6, 3), labels: new Int32Array(16) }));
  const m = 8,
    p = 4;
  const gpipe = await pipelinedRun(jsBackend, mlp, batches, m, p, 'gpipe');
  const f1b = await pipelinedRun(jsBackend, mlp, batches, m, p, '1f1b');
  for (let s = 0; s < p; s++) {
    // equal micro-batches (16 / 8): each holds the same bytes, so the ratio is exact
    assert.equal(f1b.peakActivationBytes[s]! * m, gpipe.peakActivationBytes[s]! * Math.min(p - s, m), `stage ${s}`);
    assert.ok(gpipe.peakActivationBytes[s]! > 0);
  }
});
