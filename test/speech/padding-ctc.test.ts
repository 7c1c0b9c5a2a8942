/**
 * Padding never changes a result, through a whole speech model and the CTC loss: the same
 * utterances padded to their longest and to 9 frames more, with garbage in the padding, give the
 * same loss, transcripts and parameter gradients (a conv1d that shortens time maps the lengths the
 * loss gets; dropout masks do not depend on the padded length).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { jsBackend } from '../../src/kernels/js/index.ts';
import { Replica } from '../../src/runtime/device/replica.ts';
import { speechBatch } from '../../src/data/batches.ts';
import { speechConfig, syntheticSpeech } from './trainHelpers.ts';
import { assertClose } from '../util/close.ts';

test('a speech model with CTC gives the same loss and gradients whatever the padding', async () => {
  const ds = syntheticSpeech(7, { featureSize: 3, context: 1 }).speech!;
  const config = speechConfig({
    width: 9,
    layers: [
      { conv1d: { filters: 6, kernelSize: 3, activation: 'relu' } }, // valid: 2 frames fewer
      { layerNorm: {} },
      { dropout: { rate: 0.3, masks: 'per-sample' } },
      { lstm: { units: 4, bidirectional: 'concat' } },
      { dense: { units: 5, activation: 'clippedRelu' } },
      { dense: { units: 29 } },
    ],
  });
  const replica = new Replica(jsBackend, config);
  const indices = [0, 1, 2, 3, 4, 5, 6];
  const run = async (extra: number) => {
    const b = speechBatch(ds, indices, 0);
    const padded = speechBatch(ds, indices, b.sequence!.frames + extra);
    const s = padded.sequence!,
      width = 9;
    // garbage where the padding is
    for (let k = 0; k < indices.length; k++) {
      for (let t = s.lengths[k]!; t < s.frames; t++)
        padded.images.fill(
          1e3 * (t + 1) * (k % 2 ? -1 : 1),
          (k * s.frames + t) * width,
          (k * s.frames + t + 1) * width,
        );
    }
    replica.zeroGrads();
    const ctx = { training: true, seed: 3, step: 2, sampleOffset: 0, lengths: s.lengths };
    const r = await replica.computeGradientsAsync(
      padded.images,
      padded.labels,
      ctx,
      1 / indices.length,
      undefined,
      indices.length,
      undefined,
      s,
    );
    return { r, grads: replica.model.grads.slice(), frames: s.frames };
  };
  const tight = await run(0),
    loose = await run(9);
  assert.equal(loose.frames, tight.frames + 9);
  assert.ok(Number.isFinite(tight.r.lossSum) && tight.r.lossSum > 0);
  assert.equal(loose.r.lossSum, tight.r.lossSum, 'loss');
  assert.deepEqual(loose.r.errors, tight.r.errors, 'the same greedy transcripts');
  assert.equal(loose.r.correct, tight.r.correct);
  // every gradient, bit for bit on the js backend: padded rows add exact zeros
  assertClose(loose.grads, tight.grads, { rtol: 0, atol: 0, what: 'parameter gradients' });
  assert.ok(tight.grads.some((g) => g !== 0));
});
