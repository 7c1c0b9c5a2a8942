/** The CSV reader and `dataset: csv`: classes from the data, regression targets, and errors naming file:line and column. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseCsv } from '../../src/data/csv.ts';
import { loadDataset } from '../../src/data/registry.ts';
import { parseConfig } from '../../src/config/index.ts';
import { tmpDir } from './helpers.ts';

test('parseCsv: quotes, doubled quotes, newlines in quotes, CRLF, blank lines, a BOM; records keep their line', () => {
  const text = '\ufeffa,b,c\r\n1,"x, y",3\r\n\r\n  \n4,"say ""hi""","two\nlines"\n5,6,7';
  assert.deepEqual(parseCsv(text, 'f.csv'), [
    { line: 1, fields: ['a', 'b', 'c'] },
    { line: 2, fields: ['1', 'x, y', '3'] },
    { line: 5, fields: ['4', 'say "hi"', 'two\nlines'] },
    { line: 7, fields: ['5', '6', '7'] },
  ]);
  assert.deepEqual(parseCsv('1;2\n', 'f.csv', ';'), [{ line: 1, fields: ['1', '2'] }]);
  assert.throws(() => parseCsv('a,b\n1,"open\n2,3\n', 'f.csv'), /^Error: f\.csv:2: a quoted field is never closed/);
  assert.throws(() => parseCsv('a,"b"c\n', 'f.csv'), /f\.csv:1: field 2 has text after its closing quote/);
});

const model = (input: number, units: number) => ({ input: [input], layers: [{ dense: { units } }] });
function spec(data: Record<string, unknown>, input = 2, units = 3) {
  return parseConfig({ model: model(input, units), data: { dataset: 'csv', ...data } }).data;
}
function write(dir: string, name: string, text: string): string {
  writeFileSync(join(dir, name), text);
  return name;
}
const ctx = { inputShape: [2], seed: 3 };

test('a 3-class CSV: string labels become sorted class indices, features by default every other column', async () => {
  const dir = tmpDir();
  write(dir, 'train.csv', 'x1,species,x2\n1,versicolor,2\n3,setosa,4\n5,virginica,6\n7,setosa,8\n');
  write(dir, 'test.csv', 'x1,species,x2\n0.5,virginica,-1\n');
  const data = await loadDataset(spec({ train: 'train.csv', test: 'test.csv', label: 'species', dir }), ctx);
  assert.deepEqual(data.train.classNames, ['setosa', 'versicolor', 'virginica']);
  assert.equal(data.train.classes, 3);
  assert.deepEqual(Array.from(data.train.labels), [1, 0, 2, 0]);
  assert.deepEqual(Array.from(data.train.images), [1, 2, 3, 4, 5, 6, 7, 8]);
  assert.deepEqual(data.train.sampleShape, [2]);
  assert.deepEqual(Array.from(data.test!.labels), [2]);
  assert.deepEqual(Array.from(data.test!.images), [0.5, -1]);
  assert.match(data.source, /CSV .*train\.csv \(4 \/ 1\)/);
  // a label only in the test file is refused, naming it
  write(dir, 'bad-test.csv', 'x1,species,x2\n1,daisy,2\n');
  await assert.rejects(
    loadDataset(spec({ train: 'train.csv', test: 'bad-test.csv', label: 'species', dir }), ctx),
    /bad-test\.csv:2: column 2 'species': label "daisy" is not among the training set's classes \(setosa, versicolor, virginica\)/,
  );
});

test('integer labels without a header: the last column by default, classes = largest label + 1 over every file', async () => {
  const dir = tmpDir();
  write(dir, 'a.csv', '0.1,0.2,0\n0.3,0.4,1\n');
  write(dir, 'b.csv', '0.5,0.6,2\n');
  const data = await loadDataset(spec({ train: 'a.csv', test: 'b.csv', header: false, dir }), ctx);
  assert.equal(data.train.classes, 3);
  assert.equal(data.test!.classes, 3);
  assert.equal(data.train.classNames, undefined);
  const named = await loadDataset(
    spec({ train: 'a.csv', header: false, label: 2, classNames: ['no', 'yes', 'maybe'], dir }),
    ctx,
  );
  assert.deepEqual(named.train.classNames, ['no', 'yes', 'maybe']);
  assert.equal(named.train.classes, 3);
});

test('regression: one or more target columns, by name or index', async () => {
  const dir = tmpDir();
  write(dir, 'r.csv', 'a,b,y1,y2\n1,2,0.5,-3\n3,4,1.5,7e-1\n');
  const data = await loadDataset(spec({ train: 'r.csv', task: 'regression', targets: ['y1', -1], dir }), ctx);
  assert.equal(data.train.task, 'regression');
  assert.equal(data.train.targetSize, 2);
  assert.deepEqual(Array.from(data.train.targets!), [0.5, -3, 1.5, Math.fround(0.7)]);
  assert.deepEqual(Array.from(data.train.images), [1, 2, 3, 4]);
  assert.equal(data.train.classes, 0);
  assert.deepEqual(data.train.classNames, ['y1', 'y2']);
  const one = await loadDataset(spec({ train: 'r.csv', task: 'regression', features: ['a', 'b'], dir }), ctx);
  assert.deepEqual(Array.from(one.train.targets!), [-3, 0.7].map(Math.fround));
});

test('bad CSV files: a non-numeric cell names file:line and column, ragged rows, unknown columns, empty files', async () => {
  const dir = tmpDir();
  write(dir, 'text.csv', 'a,b,label\n1,2,x\n3,abc,y\n');
  await assert.rejects(loadDataset(spec({ train: 'text.csv', dir }), ctx), (e: Error) => {
    assert.match(
      e.message,
      /text\.csv:3: column 2 'b': "abc" is not a number; feature and target columns must hold plain decimal numbers/,
    );
    assert.ok(e.message.includes(join(dir, 'text.csv')), 'the full path of the file');
    return true;
  });
  write(dir, 'empty-cell.csv', 'a,b,label\n1,,x\n');
  await assert.rejects(
    loadDataset(spec({ train: 'empty-cell.csv', dir }), ctx),
    /empty-cell\.csv:2: column 2 'b' is empty \(a missing value\)/,
  );
  write(dir, 'ragged.csv', 'a,b,label\n1,2,x\n\n3,4\n');
  await assert.rejects(
    loadDataset(spec({ train: 'ragged.csv', dir }), ctx),
    /ragged\.csv:4: 2 fields, but the header \(line 1\) has 3; every row needs the same columns/,
  );
  await assert.rejects(
    loadDataset(spec({ train: 'text.csv', label: 'kind', dir }), ctx),
    /data\.label: .*text\.csv has no column "kind"; its columns are a, b, label/,
  );
  await assert.rejects(
    loadDataset(spec({ train: 'text.csv', label: 5, dir }), ctx),
    /data\.label: column index 5 is outside the 3 columns of .*text\.csv/,
  );
  await assert.rejects(
    loadDataset(spec({ train: 'text.csv', header: false, label: 'label', dir }), ctx),
    /data\.label: column "label" is a name, but data\.header is false/,
  );
  write(dir, 'header-only.csv', 'a,b,label\n');
  await assert.rejects(
    loadDataset(spec({ train: 'header-only.csv', dir }), ctx),
    /header-only\.csv: no data rows after the header/,
  );
  await assert.rejects(loadDataset(spec({ train: 'missing.csv', dir }), ctx), /file .*missing\.csv not found/);
  write(dir, 'multi.csv', 'a,b,t\n1,2,0.5\n');
  await assert.rejects(
    loadDataset(spec({ train: 'multi.csv', task: 'multiLabel', dir }), ctx),
    /multi\.csv:2: column 3 't' holds 0\.5; multi-label targets are 0 or 1/,
  );
});

test('the csv config section: label vs targets by task, unknown keys named with the allowed ones', () => {
  assert.throws(
    () => spec({ train: 'a.csv', targets: 'y' }),
    /data\.targets: targets are for task: regression or multiLabel/,
  );
  assert.throws(
    () => spec({ train: 'a.csv', task: 'regression', label: 'y' }),
    /data\.label: label is for task: classification/,
  );
  assert.throws(
    () => spec({ train: 'a.csv', labels: 'y' }),
    /data: unknown option 'labels' \(did you mean 'label'\?\); allowed: .*train, test, validation, task, header, delimiter, label/,
  );
  assert.throws(
    () => spec({ dataset: 'cvs', train: 'a.csv' }),
    /data\.dataset: expected one of fashion-mnist, idx, csv, npy, imageFolder, memory, speech, text, got 'cvs' \(did you mean 'csv'\?\)/,
  );
  assert.throws(() => spec({}), /data\.train: missing; expected a CSV file path/);
  assert.throws(
    () => spec({ train: 'a.csv', validation: 1.5 }),
    /data\.validation: expected a fraction of the training set/,
  );
});

test("validation and test files are read by the training file's column names; without a header, by position", async () => {
  const dir = tmpDir();
  write(dir, 'train.csv', 'x1,species,x2,note\n1,versicolor,2,7\n3,setosa,4,7\n');
  write(dir, 'test.csv', 'species,x2,note,x1\nsetosa,-1,0,0.5\n');
  const data = await loadDataset(
    spec({ train: 'train.csv', test: 'test.csv', label: 'species', features: ['x1', 'x2'], dir }),
    ctx,
  );
  assert.deepEqual(Array.from(data.test!.images), [0.5, -1], 'x1 then x2, wherever they stand');
  assert.deepEqual(Array.from(data.test!.labels), [0]);
  assert.deepEqual(data.train.columns, { features: ['x1', 'x2'], label: 'species', unused: ['note'] });
  const bad = (name: string, text: string) =>
    loadDataset(spec({ train: 'train.csv', test: write(dir, name, text), label: 'species', dir }), ctx);
  await assert.rejects(
    bad('no-x2.csv', 'x1,species,note\n1,setosa,0\n'),
    /no-x2\.csv: no column 'x2', the model's feature 2 of 3 \(x1, x2, note\); its columns are x1, species, note; add it/,
  );
  await assert.rejects(
    bad('extra.csv', 'x1,species,x2,note,id\n1,setosa,2,0,17\n'),
    /extra\.csv: column 5 'id' is not a column the model was trained on \(features x1, x2, note; label species\); remove it from the file/,
  );
  await assert.rejects(
    bad('no-label.csv', 'x1,x2,note\n1,2,0\n'),
    /no-label\.csv: no label column 'species' \(the training file's\)/,
  );
  await assert.rejects(
    bad('twice.csv', 'x1,species,x2,x1\n1,setosa,2,0\n'),
    /twice\.csv: column 1 and column 4 are both named 'x1'; rename one/,
  );
  write(dir, 'a.csv', '0.1,0.2,0\n0.3,0.4,1\n');
  write(dir, 'wide.csv', '0.5,0.6,0.7,2\n');
  await assert.rejects(
    loadDataset(spec({ train: 'a.csv', test: 'wide.csv', header: false, dir }), ctx),
    /wide\.csv: 4 columns, but the training file .*a\.csv has 3; its columns are read by position/,
  );
});
