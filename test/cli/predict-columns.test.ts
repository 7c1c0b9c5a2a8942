/**
 * CSV columns by name: a model trained here on an iris-like CSV (a header; each class marked by a
 * large value in its own feature column) predicts the same classes for the same rows whatever the
 * order of the columns in the file, with the training label column left in or out; a missing or
 * unknown column is refused naming it and the file; a headerless file is read in order; a
 * checkpoint without column names reads by position and says so. `eval` of a CSV run reads the test
 * file alone (the training file gone), by name, with the config's paths from the config's folder.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdirSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { train, defineConfig, readCheckpoint, writeCheckpoint, DATA_METADATA_KEY } from '../../src/index.ts';
import { runPredict } from '../../src/cli/predictCommand.ts';
import { runEval } from '../../src/cli/evalCommand.ts';
import { MAIN, tmpDir } from './helpers.ts';

const dir = tmpDir('paratrain-predict-columns-');
const SPECIES = ['setosa', 'versicolor', 'virginica'];
const COLUMNS = ['sepal_length', 'sepal_width', 'species', 'petal_length', 'petal_width'];

/** Row i: class i mod 3, marked by a value near 5 in feature column (class), the others near 1. */
function rows(count: number, seed: number): { features: number[]; species: string }[] {
  let s = seed;
  const noise = () => {
    s = (s * 1103515245 + 12345) % 2147483648;
    return (s / 2147483648 - 0.5) * 0.6;
  };
  return Array.from({ length: count }, (_, i) => {
    const k = i % 3;
    const features = [0, 1, 2, 3].map((f) => Number(((f === k ? 5 : 1) + noise()).toFixed(2)));
    return { features, species: SPECIES[k]! };
  });
}

/** The rows as CSV text with the given columns, in that order (names from COLUMNS). */
function csvText(data: { features: number[]; species: string }[], columns: readonly string[]): string {
  const value = (r: { features: number[]; species: string }, c: string) =>
    c === 'species' ? r.species : r.features[COLUMNS.filter((n) => n !== 'species').indexOf(c)]!;
  return `${columns.join(',')}\n${data.map((r) => columns.map((c) => value(r, c)).join(',')).join('\n')}\n`;
}

function write(name: string, text: string): string {
  const file = join(dir, name);
  writeFileSync(file, text);
  return file;
}

/** What `paratrain predict` writes, run in this process. */
async function predict(
  args: string[],
  labelColumn?: string,
  from = checkpoint,
): Promise<{ stdout: string; stderr: string }> {
  let stdout = '',
    stderr = '';
  await runPredict(
    args,
    { checkpoint: from, ...(labelColumn ? { labelColumn } : {}) },
    {
      out: { write: (t: string) => (stdout += t) },
      err: { write: (t: string) => (stderr += t) },
    },
  );
  return { stdout, stderr };
}
/** The class names predicted, one per row of predict's CSV output. */
const classesOf = (stdout: string) =>
  stdout
    .trim()
    .split('\n')
    .slice(1)
    .map((line) => line.split(',')[2]!);

const trainRows = rows(90, 7);
const checkpoint = (
  await train(
    defineConfig({
      model: { input: [4], layers: [{ dense: { units: 3 } }] },
      optimizer: { adam: { lr: 0.1 } },
      data: {
        dataset: 'csv',
        train: write('train.csv', csvText(trainRows, COLUMNS)),
        label: 'species',
        batchSize: 15,
        normalize: 'computed',
      },
      train: { epochs: 30, backend: 'js', evalEvery: 0, seed: 1 },
    }),
    { out: join(dir, 'run') },
  )
).checkpoint;
const newRows = rows(12, 99);
const FEATURES = COLUMNS.filter((c) => c !== 'species');

test('predict matches CSV columns by header name: another column order gives the same classes', async () => {
  const inOrder = classesOf((await predict([write('in-order.csv', csvText(newRows, FEATURES))])).stdout);
  assert.deepEqual(
    inOrder,
    newRows.map((r) => r.species),
    'the model learnt the classes (each one a column of its own)',
  );
  const permuted = write(
    'permuted.csv',
    csvText(newRows, ['petal_width', 'sepal_width', 'petal_length', 'sepal_length']),
  );
  assert.deepEqual(classesOf((await predict([permuted])).stdout), inOrder);
});

test('the training label column in the file is left out (said once); --label-column scores against it', async () => {
  const inOrder = classesOf((await predict([join(dir, 'in-order.csv')])).stdout);
  const labelled = write(
    'labelled.csv',
    csvText(newRows, ['species', 'petal_length', 'sepal_width', 'petal_width', 'sepal_length']),
  );
  const r = await predict([labelled]);
  assert.deepEqual(classesOf(r.stdout), inOrder);
  assert.equal(
    r.stderr,
    `${labelled}: column 1 'species', a label the model was trained on, is left out of the features (--label-column species scores the predictions against it)\n`,
  );
  const scored = await predict([labelled], 'species');
  assert.deepEqual(
    scored.stdout
      .trim()
      .split('\n')
      .slice(1)
      .map((line) => [line.split(',')[1], line.split(',')[3]]),
    newRows.map((row, i) => [row.species, inOrder[i]]),
    'the true label beside the prediction',
  );
  assert.equal(scored.stderr, 'accuracy on 12 labelled rows: 1.0000 (12 of 12)\n');
});

test('a missing or unknown column is refused naming it and the file; a file without a header is read in order', async () => {
  const missing = write('missing.csv', csvText(newRows, ['sepal_length', 'species', 'petal_length', 'petal_width']));
  await assert.rejects(
    predict([missing]),
    (e: Error) =>
      e.message ===
      `${missing}: no column 'sepal_width', the model's feature 2 of 4 (sepal_length, sepal_width, petal_length, petal_width); its columns are sepal_length, species, petal_length, petal_width; add it`,
  );
  const extra = write('extra.csv', `id,${csvText(newRows, FEATURES).replace(/\n(?=.)/g, '\nx,')}`);
  await assert.rejects(
    predict([extra]),
    /extra\.csv: column 1 'id' is not a column the model was trained on \(features sepal_length, sepal_width, petal_length, petal_width; label species\); remove it from the file \(if it holds the true labels, name it with --label-column\)/,
  );
  await assert.rejects(
    predict([join(dir, 'in-order.csv')], 'petal_length'),
    /--label-column petal_length is column 3 'petal_length', one of the model's features/,
  );
  const noHeader = write('no-header.csv', csvText(newRows, FEATURES).split('\n').slice(1).join('\n'));
  const positional = await predict([noHeader]);
  assert.deepEqual(
    classesOf(positional.stdout),
    newRows.map((r) => r.species),
  );
  assert.equal(positional.stderr, '');
  const wide = write('wide.csv', csvText(newRows, COLUMNS).split('\n').slice(1).join('\n'));
  await assert.rejects(
    predict([wide]),
    /wide\.csv:1: 5 feature values; the model takes \[4\] = 4 values per sample \(one more: is a column the label\? name it with --label-column\)/,
  );
});

test('a checkpoint without column names (older runs) reads a CSV by position and says so once', async () => {
  const { tensors, metadata } = readCheckpoint(checkpoint);
  const data = JSON.parse(metadata[DATA_METADATA_KEY]!);
  assert.deepEqual(data.columns, { features: FEATURES, label: 'species' }, 'what the run recorded');
  delete data.columns;
  const old = join(dir, 'old.safetensors');
  writeCheckpoint(
    old,
    [...tensors].map(([name, t]) => ({ name, ...t })),
    { ...metadata, [DATA_METADATA_KEY]: JSON.stringify(data) },
  );
  const r = await predict([join(dir, 'in-order.csv')], undefined, old);
  assert.deepEqual(
    classesOf(r.stdout),
    newRows.map((row) => row.species),
  );
  assert.match(
    r.stderr,
    /^\S+in-order\.csv: the checkpoint records no column names \(.*\), so the header is not checked: the columns are read in order\n$/,
  );
});

test("eval of a CSV run: paths from the config's folder, the test file alone, its columns by name", async () => {
  const project = join(dir, 'project');
  const elsewhere = join(dir, 'elsewhere');
  mkdirSync(join(project, 'data'), { recursive: true });
  mkdirSync(elsewhere);
  writeFileSync(join(project, 'data', 'train.csv'), csvText(trainRows, COLUMNS));
  // the test file's columns in another order than the training file's
  writeFileSync(
    join(project, 'data', 'test.csv'),
    csvText(newRows, ['petal_width', 'species', 'sepal_length', 'petal_length', 'sepal_width']),
  );
  const config = join(project, 'iris.yaml');
  writeFileSync(
    config,
    `model: { input: [4], layers: [{ dense: { units: 3 } }] }
optimizer: { adam: { lr: 0.1 } }
data: { dataset: csv, train: data/train.csv, test: data/test.csv, label: species, batchSize: 15, normalize: computed }
train: { epochs: 30, backend: js, evalEvery: 0, seed: 1 }
`,
  );
  // run from another folder: data/train.csv is the config's, not the working directory's
  const run = join(dir, 'eval-run');
  const r = spawnSync(
    process.execPath,
    ['--import', import.meta.resolve('tsx'), MAIN, 'train', config, '--out', run, '--quiet'],
    {
      cwd: elsewhere,
      encoding: 'utf8',
      env: { ...process.env, PARATRAIN_OFFLINE: '1' },
    },
  );
  assert.equal(r.status, 0, r.stderr);
  const trained = JSON.parse(r.stdout.trim().split('\n').pop()!);
  assert.equal(trained.testAccuracy, 1, 'the test file was read by name in training too');
  // eval needs neither the training file nor the working directory
  renameSync(join(project, 'data', 'train.csv'), join(project, 'data', 'train.csv.away'));
  const evals = [];
  for (const configPath of [undefined, config]) {
    let stdout = '';
    await runEval(
      configPath,
      { checkpoint: join(run, 'model.safetensors'), quiet: true },
      { out: { write: (t: string) => (stdout += t) }, err: { write: () => {} } },
    );
    evals.push(JSON.parse(stdout));
  }
  assert.deepEqual(
    evals.map((e) => [e.testSamples, e.testAccuracy]),
    [
      [12, 1],
      [12, 1],
    ],
  );
  assert.equal(evals[0].testLoss, evals[1].testLoss, 'the stored config and the file name the same data');
  const stored = JSON.parse(readCheckpoint(join(run, 'model.safetensors')).metadata.config!);
  assert.equal(stored.data.dir, project, "the stored config's data.dir: the config's folder, absolute");
});
