import { test } from 'node:test';
import assert from 'node:assert/strict';
import { jsBackend } from '../../src/kernels/js/index.ts';
import { Tensor } from '../../src/tensor/tensor.ts';
import { buildModel, type Sequential } from '../../src/nn/model.ts';
import { TokenCrossEntropy } from '../../src/nn/tokenCrossEntropy.ts';
import type { Dataset } from '../../src/data/dataset.ts';
import type { Replica } from '../../src/runtime/device/replica.ts';
import { evaluateReplica } from '../../src/runtime/eval/evaluateReplica.ts';
import { randomArray } from '../util/close.ts';

const T = 4,
  V = 6,
  COUNT = 5;

test('evaluating a language model: the loss is the mean per token and the accuracy tokens right / tokens, over batches', async () => {
  const model = buildModel(jsBackend, {
    input: [T],
    layers: [
      { type: 'embedding', vocab: V, dim: 8 },
      { type: 'positionEncoding', encoding: 'learned' },
      { type: 'tiedEmbedding', vocab: V },
    ],
  });
  model.initialize(4);
  // larger weights than N(0, 0.02²), so that some arg-maxes hit their labels and others miss
  model.params.set(randomArray(model.params.length, 2).map((v) => 2 * v));
  const token = (v: number) => Math.floor(((v + 1) / 2) * V);
  const text: Dataset = {
    name: 'windows',
    images: Float32Array.from(randomArray(COUNT * T, 3), token),
    labels: Int32Array.from(randomArray(COUNT * T, 4), token),
    count: COUNT,
    sampleShape: [T],
    classes: V,
    task: 'language',
    labelsPerSample: T,
  };
  // what evaluateReplica uses of a Replica: its model, its loss and its input tensors
  const replica = {
    model,
    loss: new TokenCrossEntropy(jsBackend),
    batchTensor: (images: Float32Array, n: number) => new Tensor([n, T], images.slice()),
    weightsToDevice: () => {},
  } as unknown as Replica<Sequential>;
  const r = await evaluateReplica(replica, text, 2);

  const logits = model.forward(new Tensor([COUNT, T], text.images), {
    training: false,
    seed: 0,
    step: 0,
    sampleOffset: 0,
  });
  let total = 0,
    right = 0;
  for (let p = 0; p < COUNT * T; p++) {
    const row = [...logits.data.subarray(p * V, (p + 1) * V)];
    const max = Math.max(...row);
    total += max + Math.log(row.reduce((s, z) => s + Math.exp(z - max), 0)) - row[text.labels[p]!]!;
    if (row.indexOf(max) === text.labels[p]) right++;
  }
  assert.ok(right > 0 && right < COUNT * T, `a test whose accuracy is ${right}/${COUNT * T} checks little`);
  assert.ok(Math.abs(r.loss - total / (COUNT * T)) < 1e-5, `loss ${r.loss} vs ${total / (COUNT * T)} per token`);
  assert.ok(Math.abs(r.accuracy - right / (COUNT * T)) < 1e-12, `accuracy ${r.accuracy} vs ${right}/${COUNT * T}`);
});
