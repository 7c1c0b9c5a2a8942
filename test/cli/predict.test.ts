/**
 * `paratrain predict` and `paratrain eval` without a config: a model trained here predicts on
 * .npy arrays made by NumPy (uint8 and float, (N, 28, 28, 1) and (N, 784)), PNG and JPEG files
 * made by pngjs/jpeg-js, as JSON into --output, agreeing with the library's predict ((N, 28, 28)
 * and one (28, 28) array for the grey model too); CSV rows with
 * a header and a named label column give CSV with class names and the accuracy; eval reads the
 * config from the checkpoint and prints per-class figures and the confusion matrix. Bad inputs
 * (shape, size, type, CSV cells, damaged .npy) are one error naming the file; a colour image for a
 * grey model is its luma. One CLI process (its start, compiling the sources with tsx, is most of
 * the test's few seconds); the other commands run in this process.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import pngjs from 'pngjs';
import jpeg from 'jpeg-js';
import { train, defineConfig, loadModel } from '../../src/index.ts';
import { readPredictInputs } from '../../src/runtime/infer/predictInputs.ts';
import { runPredict } from '../../src/cli/predictCommand.ts';
import { runEval } from '../../src/cli/evalCommand.ts';
import { loadFashionMnist } from '../../src/data/fashionMnist.ts';
import { runCli, SUBSET, tmpDir } from './helpers.ts';
import { ROWS, ofTask, writeFeatureCheckpoint } from '../runtime/predictHelpers.ts';

const PER = 28 * 28;
const dir = tmpDir('paratrain-predict-cli-');
const images = (await loadFashionMnist({ dir: SUBSET })).test;

/** A command run in this process (the CLI's wiring is tested once, by the first test): what it wrote. */
async function inProcess(
  run: (io: { out: { write(s: string): void }; err: { write(s: string): void } }) => Promise<void>,
): Promise<{ stdout: string; stderr: string }> {
  let stdout = '',
    stderr = '';
  await run({
    out: {
      write: (s) => {
        stdout += s;
      },
    },
    err: {
      write: (s) => {
        stderr += s;
      },
    },
  });
  return { stdout, stderr };
}

/** Image s of the test set as RGBA bytes (grey: r = g = b). */
function rgba(s: number, colour = false): Uint8Array {
  const out = new Uint8Array(PER * 4);
  for (let p = 0; p < PER; p++) {
    const v = Math.round(images.images[s * PER + p]! * 255);
    out.set([v, colour ? 255 - v : v, v, 255], p * 4);
  }
  return out;
}
const writePng = (file: string, data: Uint8Array, w = 28, h = 28) => {
  const png = new pngjs.PNG({ width: w, height: h });
  png.data = Buffer.from(data);
  writeFileSync(file, pngjs.PNG.sync.write(png));
  return file;
};

/** NumPy writes the arrays from the IDX file itself (an independent writer of .npy). */
function numpyArrays(): void {
  execFileSync('/usr/bin/python3', [
    '-c',
    `
import gzip, numpy as np, sys
d = sys.argv[1]
x = np.frombuffer(gzip.open(d + '/t10k-images-idx3-ubyte.gz').read(), np.uint8, offset=16).reshape(-1, 28, 28, 1)[:12]
np.save(sys.argv[2] + '/u8.npy', x)
np.save(sys.argv[2] + '/f64.npy', (x[:5].astype(np.float64) / 255).reshape(5, 784))
np.save(sys.argv[2] + '/wrong.npy', np.zeros((3, 27, 28, 1), np.float32))
np.save(sys.argv[2] + '/hw.npy', x[:3, :, :, 0])
np.save(sys.argv[2] + '/one-hw.npy', x[4, :, :, 0])
np.save(sys.argv[2] + '/fortran.npy', np.asfortranarray(np.zeros((2, 784), np.float32)))
np.save(sys.argv[2] + '/complex.npy', np.zeros((2, 784), np.complex64))
`,
    SUBSET,
    dir,
  ]);
}

const trained = await train(
  defineConfig({
    model: {
      input: [28, 28, 1],
      layers: ['flatten', { dense: { units: 16, activation: 'relu' } }, { dense: { units: 10 } }],
    },
    optimizer: { adam: { lr: 0.003 } },
    data: { dir: SUBSET, batchSize: 32, trainLimit: 256, testLimit: 100 },
    train: { epochs: 1, backend: 'js', evalEvery: 0, seed: 2 },
  }),
  { out: join(dir, 'run') },
);

test('predict: .npy (NumPy uint8 and float64), PNG and JPEG as JSON into --output, as the library predicts them', async () => {
  numpyArrays();
  const png = writePng(join(dir, 'seven.png'), rgba(7));
  const jpg = join(dir, 'eight.jpg');
  writeFileSync(jpg, jpeg.encode({ width: 28, height: 28, data: rgba(8) }, 100).data);
  const out = join(dir, 'predictions.json');
  const r = await runCli([
    'predict',
    '--checkpoint',
    trained.checkpoint,
    '--format',
    'json',
    '--output',
    out,
    join(dir, 'u8.npy'),
    join(dir, 'f64.npy'),
    png,
    jpg,
  ]);
  assert.equal(r.code, 0, r.stderr);
  assert.equal(r.stdout, '');
  const json = JSON.parse(readFileSync(out, 'utf8'));
  assert.equal(json.task, 'classification');
  assert.equal(json.classNames[0], 'T-shirt/top');
  assert.equal(json.predictions.length, 12 + 5 + 2);
  assert.equal(json.predictions[0].source, `${join(dir, 'u8.npy')}[0]`);
  const model = await loadModel(trained.checkpoint);
  const api = model.predict(images.images.subarray(0, 12 * PER)).map((p) => ofTask(p, 'classification'));
  for (let s = 0; s < 12; s++) {
    assert.equal(json.predictions[s].class, api[s]!.class);
    assert.equal(json.predictions[s].label, api[s]!.label);
    assert.ok(
      json.predictions[s].probabilities.every((p: number, c: number) => Math.abs(p - api[s]!.probabilities[c]!) < 1e-6),
    );
  }
  for (let s = 0; s < 5; s++)
    assert.equal(json.predictions[12 + s].class, api[s]!.class, 'the (N, 784) float64 array holds the same images');
  assert.deepStrictEqual(
    json.predictions[17].probabilities,
    ofTask(model.predict(images.images.subarray(7 * PER, 8 * PER))[0], 'classification').probabilities,
    'a grey PNG is the image exactly',
  );
  assert.equal(json.predictions[18].source, jpg);
});

test('predict: CSV rows with a header and a label column → CSV with class names, and the accuracy on stderr', async () => {
  const ckpt = writeFeatureCheckpoint(join(dir, 'iris.safetensors'), {
    task: 'classification',
    classNames: ['setosa', 'versicolor', 'virginica'],
    inputShape: [4],
    normalization: { mean: [5.8, 3.0, 3.8, 1.2], std: [0.8, 0.4, 1.8, 0.75] },
    columns: { features: ['sepal_length', 'sepal_width', 'petal_length', 'petal_width'], label: 'species' },
  });
  const truth = ['setosa', 'virginica', 'versicolor'];
  const csv = join(dir, 'iris.csv');
  writeFileSync(
    csv,
    `sepal_length,sepal_width,petal_length,petal_width,species\n${ROWS.map((r, i) => `${r.join(',')},${truth[i]}`).join('\n')}\n`,
  );
  const r = await inProcess((io) => runPredict([csv], { checkpoint: ckpt, labelColumn: 'species' }, io));
  const lines = r.stdout.trim().split('\n');
  assert.equal(lines[0], 'source,true,class,label,p_setosa,p_versicolor,p_virginica');
  const api = (await loadModel(ckpt)).predict(ROWS).map((p) => ofTask(p, 'classification'));
  lines.slice(1).forEach((line, i) => {
    const cells = line.split(',');
    assert.deepStrictEqual(cells.slice(0, 4), [`${csv}:${i + 2}`, truth[i], String(api[i]!.class), api[i]!.label]);
  });
  const correct = api.filter((p, i) => p.label === truth[i]).length;
  assert.equal(r.stderr, `accuracy on 3 labelled rows: ${(correct / 3).toFixed(4)} (${correct} of 3)\n`);
});

test('eval without a config: read from the checkpoint; per-class precision/recall/F1 and the confusion matrix', async () => {
  const r = await inProcess((io) => runEval(undefined, { checkpoint: trained.checkpoint }, io));
  const e = JSON.parse(r.stdout.trim());
  assert.equal(e.testSamples, 100);
  assert.equal(e.testAccuracy, trained.testAccuracy);
  assert.equal(e.classes.length, 10);
  assert.equal(e.classes[0].name, 'T-shirt/top');
  const confusion = e.confusion as number[][];
  assert.equal(
    confusion.flat().reduce((a, b) => a + b, 0),
    100,
  );
  assert.equal(
    confusion.reduce((a, row, i) => a + row[i]!, 0) / 100,
    trained.testAccuracy,
    'the diagonal is the correct predictions',
  );
  assert.match(r.stderr, /class +precision +recall +f1 +support\n0 T-shirt\/top +\d\.\d{3} +\d\.\d{3}/);
  assert.match(r.stderr, /confusion matrix \(rows: true class, columns: predicted class\)\n +0 +1 +2/);
  assert.match(r.stderr, /9 Ankle boot( +\d+){10}\n/);
});

test('input errors name the file (and line, column) and the fix', () => {
  const at = (name: string, text: string | Uint8Array) => {
    const f = join(dir, name);
    writeFileSync(f, text);
    return f;
  };
  const image = [28, 28, 1];
  const big = writePng(join(dir, 'big.png'), new Uint8Array(32 * 30 * 4).fill(200), 32, 30);
  assert.throws(
    () => readPredictInputs([big], image),
    /big\.png: the image is 32×30 \(width×height\) but model\.input needs 28×28; resize the images, or set data\.resize: true/,
  );
  const colour = writePng(join(dir, 'colour.png'), rgba(1, true));
  // a colour image for a grey model: its luma (ITU-R BT.601), as the image-folder dataset takes it
  const luma = readPredictInputs([colour], image).data;
  const v = Math.round(images.images[PER + 300]! * 255);
  assert.ok(Math.abs(luma[300]! - (0.299 * v + 0.587 * (255 - v) + 0.114 * v) / 255) < 1e-6);
  assert.throws(() => readPredictInputs([colour], [4]), /colour\.png: an image, but the model takes \[4\] \(features/);
  assert.throws(
    () => readPredictInputs([at('x.txt', '1,2')], image),
    /x\.txt: unknown input type '\.txt'; predict reads CSV rows/,
  );
  assert.throws(() => readPredictInputs([join(dir, 'missing.csv')], [4]), /missing\.csv: no such input file/);
  assert.throws(() => readPredictInputs([at('fake.png', 'not an image')], image), /fake\.png: not a PNG or JPEG image/);
  assert.throws(
    () => readPredictInputs([at('a.csv', 'a,b,c,d\n1,2,3,4\n1,2,x,4\n')], [4]),
    /a\.csv:3: column 3 'c': "x" is not a number; .* \(if it holds the true labels, name it with --label-column\)/,
  );
  assert.throws(
    () => readPredictInputs([at('b.csv', '1,2,3,4,0\n')], [4]),
    /b\.csv:1: 5 feature values; the model takes \[4\] = 4 values per sample \(one more: is a column the label\? name it with --label-column\)/,
  );
  assert.throws(
    () => readPredictInputs([at('c.csv', '1,2,3,4\n1,2\n')], [4]),
    /c\.csv:2: 2 columns, the first row has 4/,
  );
  assert.throws(
    () => readPredictInputs([at('d.csv', 'a,b,c,d,y\n1,2,3,4,0\n')], [4], { labelColumn: 'label' }),
    /d\.csv: no column named 'label' \(--label-column\); the header has a, b, c, d, y/,
  );
  const byIndex = readPredictInputs([at('e.csv', 'cat,1,2,3,4\n"dog, big",5,6,7,8\n')], [4], { labelColumn: '0' });
  assert.deepStrictEqual(
    [byIndex.count, byIndex.truth, [...byIndex.data.subarray(4)]],
    [2, ['cat', 'dog, big'], [5, 6, 7, 8]],
  );
  assert.throws(
    () => readPredictInputs([join(dir, 'wrong.npy')], image),
    new RegExp(
      `^Error: ${join(dir, 'wrong.npy')}: an array of shape \\(3, 27, 28, 1\\) does not hold samples of \\[28, 28, 1\\]; expected \\(N, 28, 28, 1\\), \\(N, 28, 28\\) or \\(N, 784\\)$`,
    ),
  );
  // a one-channel model's images without their channel axis: (N, H, W), or one (H, W)
  const pixels = readPredictInputs([join(dir, 'u8.npy')], image).data;
  const hw = readPredictInputs([join(dir, 'hw.npy')], image);
  assert.deepStrictEqual([hw.count, hw.data], [3, pixels.slice(0, 3 * PER)]);
  const one = readPredictInputs([join(dir, 'one-hw.npy')], image);
  assert.deepStrictEqual(
    [one.count, one.data, one.sources],
    [1, pixels.slice(4 * PER, 5 * PER), [`${join(dir, 'one-hw.npy')}[0]`]],
  );
  assert.throws(
    () => readPredictInputs([join(dir, 'fortran.npy')], image),
    /fortran\.npy: the array is stored in Fortran order; save it in C order/,
  );
  assert.throws(
    () => readPredictInputs([join(dir, 'complex.npy')], image),
    /complex\.npy: dtype "<c8" is not supported/,
  );
  const u8 = readFileSync(join(dir, 'u8.npy'));
  assert.throws(
    () => readPredictInputs([at('cut.npy', u8.subarray(0, u8.length - 10))], image),
    /cut\.npy: truncated \.npy file: shape \(12, 28, 28, 1\) of \|u1 needs 9408 bytes of data, found 9398; the file was cut short/,
  );
  assert.throws(() => readPredictInputs([at('junk.npy', 'hello')], image), /junk\.npy: not a \.npy file/);
});
