/** The speech parts of the config (data: { dataset: speech }, loss: ctc), the data fingerprint, and the CTC loss's blank. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parseConfig, applyOverrides } from '../../src/config/index.ts';
import { datasetFingerprint } from '../../src/data/fingerprint.ts';
import { limitDataset } from '../../src/data/dataset.ts';
import { CtcSequenceLoss } from '../../src/nn/ctcSequenceLoss.ts';
import { jsBackend } from '../../src/kernels/js/index.ts';
import { Tensor } from '../../src/tensor/tensor.ts';
import { randomArray } from '../util/close.ts';
import { syntheticSpeech } from './trainHelpers.ts';

const model = { input: [null, 26], layers: [{ dense: { units: 29 } }] };
const config = (data: Record<string, unknown>, loss: unknown = 'ctc') =>
  parseConfig({ model, loss, data: { dataset: 'speech', dir: 'data/speech-mini', ...data } }, 'c.yaml');

test('data: { dataset: speech } and loss: ctc are read with their defaults; --data sets the directory', () => {
  const c = config({ features: { context: 9 } });
  assert.deepEqual(c.data, {
    dataset: 'speech',
    dir: 'data/speech-mini',
    batchSize: 64,
    batchSizeScope: 'perDevice',
    shuffle: true,
    features: { context: 9 },
    cache: true,
    poolBatches: 50,
  });
  assert.deepEqual(c.loss, { type: 'ctc', blank: 0, reduction: 'mean', zeroInfinity: false });
  assert.deepEqual(config({}, { ctc: { reduction: 'batchMean', zeroInfinity: true } }).loss, {
    type: 'ctc',
    blank: 0,
    reduction: 'batchMean',
    zeroInfinity: true,
  });
  assert.equal(applyOverrides(c, { dataDir: '/elsewhere' }).data.dir, '/elsewhere');
});

test('bad speech options are config errors naming the field', () => {
  assert.throws(
    () => config({ features: { coefficients: 50 } }),
    /c\.yaml: data\.features\.coefficients: must be a whole number from 1 to melFilters \(40\), got 50/,
  );
  assert.throws(
    () => config({ features: { contxt: 3 } }),
    /data\.features\.contxt: unknown option; the options are type, sampleRate/,
  );
  assert.throws(() => config({ normalize: 'computed' }), /data: unknown option 'normalize'/);
  assert.throws(
    () => config({}, { ctc: { reduction: 'avg' } }),
    /loss\.ctc\.reduction: expected one of mean, sum, batchMean/,
  );
  assert.throws(() => config({ validation: 0.1 }), /data: unknown option 'validation'/);
});

test("a speech dataset's fingerprint tells two sets apart (what processes compare at rendezvous)", () => {
  const ds = syntheticSpeech(12);
  const f = datasetFingerprint(ds);
  assert.equal(f.utterances, '12');
  assert.deepEqual(datasetFingerprint(syntheticSpeech(12)), f, 'the same data, the same fingerprint');
  assert.notDeepEqual(datasetFingerprint(limitDataset(ds, 10)), f);
  assert.notDeepEqual(datasetFingerprint(syntheticSpeech(12, { seed: 9 })), f);
  assert.equal(limitDataset(ds, 10).speech!.count, 10);
});

test("loss ctc with the blank last (DeepSpeech's) equals the blank first on the same classes", () => {
  const [n, t, c] = [3, 7, 29];
  const first = randomArray(n * t * c, 4);
  // the same logits with class 0 (the blank) moved to the end: symbol k is class k + 1 → k
  const last = new Float32Array(first.length);
  for (let r = 0; r < n * t; r++)
    for (let k = 0; k < c; k++) last[r * c + (k === 0 ? c - 1 : k - 1)] = first[r * c + k]!;
  const labels = Int32Array.from([5, 1, 9, 0, 3, 3, 2, 0, 28, 0, 0, 0]),
    seq = { inputLengths: Int32Array.of(7, 6, 4), labelLengths: Int32Array.of(3, 3, 1), space: 1 };
  const a = new CtcSequenceLoss(jsBackend, { blank: 0, reduction: 'mean', zeroInfinity: false }).compute(
    new Tensor([n, t, c], first),
    labels,
    1 / n,
    undefined,
    seq,
  );
  const b = new CtcSequenceLoss(jsBackend, { blank: c - 1, reduction: 'mean', zeroInfinity: false }).compute(
    new Tensor([n, t, c], last),
    labels,
    1 / n,
    undefined,
    seq,
  );
  assert.ok(Math.abs(a.lossSum - b.lossSum) < 1e-9 * a.lossSum, `${a.lossSum} vs ${b.lossSum}`);
  assert.deepEqual(b.errors, a.errors);
  assert.equal(b.correct, a.correct);
});
