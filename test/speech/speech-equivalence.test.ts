/**
 * Speech through the parallel machinery on variable-length batches, every device in this thread
 * (test/parallel/inMemory.ts): hybrid on 2 and 4 devices equals one device with the global batch,
 * micro-batching equals no micro-batching, and a per-frame dense stack split tensor-parallel over
 * the frames (`parallel: model`) equals it unsplit.
 *
 * Tolerance: the runs differ only in floating-point summation order (a batch's gradient summed in
 * pieces, a gemm over N·T rows split by columns), so after 4 Adam steps the weights agree to
 * rtol 1e-4, atol 1e-5 (Adam's first steps move each weight by about lr whatever the gradient's
 * size, so a relative tolerance on the weights is what can be stated).
 */
import { test } from 'node:test';
import { trainInMemory } from '../parallel/inMemory.ts';
import { assertClose } from '../util/close.ts';
import { speechConfig, syntheticSpeech } from './trainHelpers.ts';
import assert from 'node:assert/strict';
import type { TrainEvent } from '../../src/runtime/events/events.ts';

const TOL = { rtol: 1e-4, atol: 1e-5 };
// localGroup runs one collective at a time: one gradient bucket, reduced after backward
const ONE_BUCKET = { bucketBytes: 1 << 30 };
const data = syntheticSpeech(30);
const test_ = syntheticSpeech(9, { seed: 2 });

function sameWeights(a: Map<string, Float32Array>, b: Map<string, Float32Array>, what: string): void {
  for (const [name, t] of b)
    if (name.startsWith('layers.')) assertClose(a.get(name)!, t, { ...TOL, what: `${what}: ${name}` });
}

test('hybrid on 2 and 4 devices equals one device on variable-length batches (dropout, bidirectional LSTM, CTC)', async () => {
  // 30 utterances in global batches of 8: the last step has 6, so on 4 devices two of them hold 1
  const one = await trainInMemory(speechConfig(), data, test_);
  for (const devices of [2, 4]) {
    const many = await trainInMemory(speechConfig({ train: { devices, strategy: 'hybrid' } }), data, test_, ONE_BUCKET);
    sameWeights(many.tensors, one.tensors, `hybrid ×${devices}`);
    const cer = (r: typeof one) =>
      r.events.filter((e) => e.type === 'eval').map((e) => (e as { testCER: number }).testCER);
    assert.deepEqual(cer(many), cer(one), 'the same test CER');
  }
  const other = await trainInMemory(speechConfig({ data: { batchSize: 10 } }), data);
  const k = 'layers.2.weight_hh_l0';
  assert.ok(
    other.tensors.get(k)!.some((v, i) => Math.abs(v - one.tensors.get(k)![i]!) > 1e-3),
    'another batch gives other weights: the comparison is not vacuous',
  );
  const evalEvent = one.events.find((e): e is Extract<TrainEvent, { type: 'eval' }> => e.type === 'eval')!;
  assert.ok(evalEvent.testCER! >= 0 && evalEvent.testWER! >= 0, 'eval events carry testCER and testWER');
});

test('micro-batching a variable-length batch equals the whole batch', async () => {
  const whole = await trainInMemory(speechConfig(), data);
  const sliced = await trainInMemory(speechConfig({ train: { microBatches: 3 } }), data);
  sameWeights(sliced.tensors, whole.tensors, 'microBatches 3');
});

test('a per-frame dense stack split over the frames (parallel: model) equals it unsplit', async () => {
  const layers = (parallel: 'data' | 'model') => [
    { dense: { units: 9, activation: 'clippedRelu', parallel } },
    { dense: { units: 7, activation: 'relu', parallel } },
    { lstm: { units: 5 } },
    { dense: { units: 29 } },
  ];
  const batch = { batchSize: 6 };
  const unsplit = await trainInMemory(speechConfig({ layers: layers('data'), data: batch }), data, test_);
  for (const devices of [2, 3]) {
    const split = await trainInMemory(
      speechConfig({ layers: layers('model'), data: batch, train: { devices, strategy: 'hybrid' } }),
      data,
      test_,
      ONE_BUCKET,
    );
    sameWeights(split.tensors, unsplit.tensors, `split over ${devices} devices`);
  }
  // the section may end the model: the alphabet layer itself column-split, its outputs gathered
  const last = [{ lstm: { units: 5 } }, { dense: { units: 29, parallel: 'model' } }];
  const whole = await trainInMemory(speechConfig({ layers: [{ lstm: { units: 5 } }, { dense: { units: 29 } }] }), data);
  const tail = await trainInMemory(
    speechConfig({ layers: last, train: { devices: 2, strategy: 'hybrid' } }),
    data,
    null,
    ONE_BUCKET,
  );
  sameWeights(tail.tensors, whole.tensors, 'split output layer');
});
