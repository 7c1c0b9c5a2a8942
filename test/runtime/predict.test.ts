/**
 * loadModel/predict: a checkpoint written here (random weights, the `paratrain.data` metadata the
 * data loaders write: task, class names, normalisation) predicts what a float64 reference of
 * softmax(((x − mean) / std)·W + b) gives, in every input form; regression and multi-label
 * outputs; absent metadata means no normalisation and classes named by index; errors name the
 * sample or the checkpoint. And the round trip: train → predict on the test images gives the
 * accuracy train reported.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { train, defineConfig, loadModel, predict } from '../../src/index.ts';
import { B, MEAN, ROWS, STD, W, ofTask, writeFeatureCheckpoint } from './predictHelpers.ts';
import { loadFashionMnist } from '../../src/data/fashionMnist.ts';
import { SUBSET, tmpDir } from '../cli/helpers.ts';
import { assertClose } from '../util/close.ts';

/** The reference: logits of the rows, normalised or not, in float64 from the float32 weights. */
function logits(rows: number[][], normalise: boolean): number[][] {
  const f = (x: number) => Math.fround(x);
  return rows.map((x) =>
    [0, 1, 2].map(
      (j) => f(B[j]!) + x.reduce((s, v, i) => s + (normalise ? (f(v) - MEAN[i]!) / STD[i]! : f(v)) * f(W[i]![j]!), 0),
    ),
  );
}
const softmax = (z: number[]) => {
  const m = Math.max(...z);
  const e = z.map((v) => Math.exp(v - m));
  const s = e.reduce((a, b) => a + b);
  return e.map((v) => v / s);
};

test('classification: normalisation and class names from paratrain.data; every input form gives the reference', async () => {
  const dir = tmpDir('paratrain-predict-');
  const names = ['setosa', 'versicolor', 'virginica'];
  const ckpt = writeFeatureCheckpoint(join(dir, 'm.safetensors'), {
    task: 'classification',
    classNames: names,
    inputShape: [4],
    normalization: { mean: MEAN, std: STD },
  });
  const model = await loadModel(ckpt);
  assert.deepStrictEqual(
    [model.task, model.outputs, model.inputShape, model.classNames],
    ['classification', 3, [4], names],
  );
  const expected = logits(ROWS, true).map(softmax);
  for (const inputs of [ROWS, ROWS.map((r) => Float32Array.from(r)), Float32Array.from(ROWS.flat()), ROWS.flat()]) {
    const p = model.predict(inputs);
    assert.equal(p.length, 3);
    p.forEach((prediction, s) => {
      const q = ofTask(prediction, 'classification');
      assertClose(q.probabilities, expected[s]!, { rtol: 1e-5, atol: 1e-6, what: `sample ${s}` });
      const best = expected[s]!.indexOf(Math.max(...expected[s]!));
      assert.equal(q.class, best);
      assert.equal(q.label, names[best]);
    });
  }
  assert.deepStrictEqual(predict(model, ROWS), model.predict(ROWS), 'predict(model, inputs) is model.predict(inputs)');
});

test('regression and multi-label checkpoints; absent metadata: no normalisation, classes named 0..K−1', async () => {
  const dir = tmpDir('paratrain-predict-');
  const raw = logits(ROWS, false);
  const reg = await loadModel(
    writeFeatureCheckpoint(join(dir, 'r.safetensors'), { task: 'regression', inputShape: [4] }),
  );
  for (const [s, q] of reg.predict(ROWS).entries())
    assertClose(ofTask(q, 'regression').values, raw[s]!, { rtol: 1e-5, atol: 1e-6, what: `values of ${s}` });
  const multi = await loadModel(
    writeFeatureCheckpoint(join(dir, 'ml.safetensors'), {
      task: 'multiLabel',
      classNames: ['a', 'b', 'c'],
      inputShape: [4],
    }),
  );
  multi.predict(ROWS).forEach((prediction, s) => {
    const q = ofTask(prediction, 'multiLabel');
    const p = raw[s]!.map((z) => 1 / (1 + Math.exp(-z)));
    assertClose(q.probabilities, p, { rtol: 1e-5, atol: 1e-6, what: `sigmoid of ${s}` });
    assert.deepStrictEqual(
      q.labels,
      ['a', 'b', 'c'].filter((_, c) => p[c]! >= 0.5),
    );
  });
  const plain = await loadModel(writeFeatureCheckpoint(join(dir, 'p.safetensors')));
  assert.equal(plain.classNames, undefined);
  const q = ofTask(plain.predict([ROWS[0]!])[0], 'classification');
  assertClose(q.probabilities, softmax(raw[0]!), { rtol: 1e-5, atol: 1e-6, what: 'unnormalised' });
  assert.equal(q.label, String(q.class));
});

test('bad inputs and bad metadata: one error naming the sample, the shape, the checkpoint and the field', async () => {
  const dir = tmpDir('paratrain-predict-');
  const model = await loadModel(writeFeatureCheckpoint(join(dir, 'm.safetensors')));
  assert.throws(
    () =>
      model.predict([
        [1, 2, 3, 4],
        [1, 2, 3],
      ]),
    /^Error: predict: sample 1 has 3 values; the model takes \[4\] = 4 values per sample$/,
  );
  assert.throws(
    () => model.predict([1, 2, 3, 4, 5]),
    /predict: 5 values are not a whole number of samples; the model takes \[4\]/,
  );
  assert.throws(() => model.predict([[1, 2, NaN, 4]]), /sample 0 holds NaN/);
  const bad = writeFeatureCheckpoint(join(dir, 'bad.safetensors'), {
    task: 'classification',
    classNames: ['x', 'y'],
    inputShape: [4],
  });
  await assert.rejects(
    loadModel(bad),
    /checkpoint .*bad\.safetensors: metadata 'paratrain\.data' names 2 classes but the model produces 3 scores per sample/,
  );
  const shape = writeFeatureCheckpoint(join(dir, 'shape.safetensors'), { task: 'classification', inputShape: [5] });
  await assert.rejects(
    loadModel(shape),
    /metadata 'paratrain\.data' says the input is \[5\] but the model takes \[4\]/,
  );
  const norm = writeFeatureCheckpoint(join(dir, 'norm.safetensors'), {
    task: 'classification',
    inputShape: [4],
    normalization: { mean: [1, 2], std: [1, 1] },
  });
  await assert.rejects(loadModel(norm), /normalization of 2 channels but the input \[4\] has 4/);
  await assert.rejects(loadModel(join(dir, 'none.safetensors')), /none\.safetensors/);
});

test('round trip: train, then predict on the test images gives the accuracy train reported', async () => {
  const dir = tmpDir('paratrain-predict-');
  const config = defineConfig({
    model: {
      input: [28, 28, 1],
      layers: ['flatten', { dense: { units: 16, activation: 'relu' } }, { dense: { units: 10 } }],
    },
    optimizer: { adam: { lr: 0.003 } },
    data: { dir: SUBSET, batchSize: 32, trainLimit: 256, testLimit: 100 },
    train: { epochs: 1, backend: 'js', evalEvery: 0, seed: 2 },
  });
  const result = await train(config, { out: join(dir, 'run') });
  const model = await loadModel(result.checkpoint);
  const { test: images } = await loadFashionMnist({ dir: SUBSET });
  const per = 28 * 28;
  const predictions = model.predict(images.images.subarray(0, 100 * per)).map((p) => ofTask(p, 'classification'));
  const correct = predictions.filter((p, i) => p.class === images.labels[i]).length;
  assert.equal(correct / 100, result.testAccuracy);
  assert.equal(
    predictions[0]!.label,
    ['T-shirt/top', 'Trouser', 'Pullover', 'Dress', 'Coat', 'Sandal', 'Shirt', 'Sneaker', 'Bag', 'Ankle boot'][
      predictions[0]!.class
    ],
  );
  // nested [28][28][1] samples are the same samples
  const nested = Array.from({ length: 2 }, (_, s) =>
    Array.from({ length: 28 }, (_, y) => Array.from({ length: 28 }, (_, x) => [images.images[s * per + y * 28 + x]!])),
  );
  assert.deepStrictEqual(model.predict(nested), predictions.slice(0, 2));
});
