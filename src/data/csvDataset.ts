/**
 * `dataset: csv`: rows of numeric feature columns and a label column (classification: class names or
 * indices) or target columns (regression values, multi-label 0/1), chosen in the training file by
 * header name or index (csvColumns.ts); other files with a header are read by the training file's
 * column names, files without one by position.
 */
import type { Dataset } from './dataset.ts';
import { columnLabel, csvNumber, parseCsv, type CsvRecord } from './csv.ts';
import { columnNamesOf, columnsByName, columnsOf, type Columns, type CsvColumnNames } from './csvColumns.ts';
import { labelMapFromText, type LabelMap } from './labels.ts';
import { readDataFile } from './files.ts';
import type { CsvDataSpec } from './spec.ts';

/** The columns of one file: header names (or undefined) and the column count. */
interface Table {
  file: string;
  names: string[] | undefined;
  width: number;
  rows: CsvRecord[];
}

function readTable(file: string, spec: CsvDataSpec): Table {
  const records = parseCsv(readDataFile(file).toString('utf8'), file, spec.delimiter);
  const header = spec.header ? records.shift() : undefined;
  const names = header?.fields.map((f) => f.trim());
  if (records.length === 0) {
    throw new Error(
      `${file}: no data rows${header ? ' after the header' : ''}; a CSV dataset needs at least one row${spec.header ? ' (set data.header: false if the first line is data)' : ''}`,
    );
  }
  const width = names?.length ?? records[0]!.fields.length;
  for (const r of records) {
    if (r.fields.length !== width) {
      const ref = header ? `the header (line ${header.line}) has ${width}` : `line ${records[0]!.line} has ${width}`;
      throw new Error(
        `${file}:${r.line}: ${r.fields.length} fields, but ${ref}; every row needs the same columns (quote a field that holds a '${spec.delimiter}')`,
      );
    }
  }
  return { file, names, width, rows: records };
}

/** The label map of the training file's label column (decides integer labels or class names). */
function trainLabelMap(table: Table, columns: Columns, spec: CsvDataSpec): LabelMap {
  return labelMapFromText(
    table.rows.map((r) => r.fields[columns.label!]!),
    spec.classNames,
  );
}

/** One CSV file's `columns` as a Dataset; `labelMap` maps label text to classes (from the training file). */
function tableToDataset(table: Table, spec: CsvDataSpec, columns: Columns, labelMap: LabelMap | undefined): Dataset {
  const { label, targets: targetCols, features } = columns;
  const count = table.rows.length,
    f = features.length,
    t = targetCols.length;
  const images = new Float32Array(count * f);
  const labels = new Int32Array(count);
  const targets = spec.task === 'classification' ? undefined : new Float32Array(count * t);
  const name = (c: number) => table.names?.[c];
  table.rows.forEach((r, k) => {
    for (let j = 0; j < f; j++)
      images[k * f + j] = csvNumber(r.fields[features[j]!]!, table.file, r.line, features[j]!, name(features[j]!));
    if (labelMap)
      labels[k] = labelMap.index(r.fields[label!]!, `${table.file}:${r.line}: ${columnLabel(label!, name(label!))}`);
    for (let j = 0; j < t; j++) {
      const c = targetCols[j]!;
      const v = csvNumber(r.fields[c]!, table.file, r.line, c, name(c));
      if (spec.task === 'multiLabel' && v !== 0 && v !== 1) {
        throw new Error(
          `${table.file}:${r.line}: ${columnLabel(c, name(c))} holds ${v}; multi-label targets are 0 or 1`,
        );
      }
      targets![k * t + j] = v;
    }
  });
  const ds: Dataset = {
    name: table.file,
    images,
    labels,
    count,
    sampleShape: [f],
    classes: labelMap ? labelMap.classes() : 0,
    task: spec.task,
  };
  if (targets) Object.assign(ds, { targets, targetSize: t });
  if (spec.task === 'multiLabel') ds.classes = t;
  const classNames = labelMap
    ? labelMap.classNames
    : (spec.classNames ?? (table.names && targetCols.map((c) => table.names![c]!)));
  if (classNames) ds.classNames = classNames;
  return ds;
}

/**
 * A validation or test file's columns: by the training file's names when both have a header, else
 * by position (the same count of columns as the training file).
 */
function columnsOfOther(table: Table, train: Table, trainColumns: Columns, names: CsvColumnNames | undefined): Columns {
  if (names && table.names) return columnsByName({ ...table, names: table.names }, names, { labelsRequired: true });
  if (table.width !== train.width)
    throw new Error(
      `${table.file}: ${table.width} columns, but the training file ${train.file} has ${train.width}; its columns are read by position, so it needs the same columns in the same order`,
    );
  return trainColumns;
}

/**
 * The CSV files of a config (resolved paths): the training set decides the columns (recorded by
 * name in the training Dataset's `columns`) and the class names; the other files are read with them.
 * Integer labels count classes over every file.
 */
export function loadCsvFiles(
  files: { train: string; validation?: string; test?: string },
  spec: CsvDataSpec,
): Record<'train' | 'validation' | 'test', Dataset | undefined> {
  const trainTable = readTable(files.train, spec);
  const trainColumns = columnsOf(trainTable, spec);
  const names = columnNamesOf(trainTable, trainColumns);
  const labelMap = spec.task === 'classification' ? trainLabelMap(trainTable, trainColumns, spec) : undefined;
  const load = (file: string | undefined) => {
    if (file === undefined) return undefined;
    const table = readTable(file, spec);
    return tableToDataset(table, spec, columnsOfOther(table, trainTable, trainColumns, names), labelMap);
  };
  const train = tableToDataset(trainTable, spec, trainColumns, labelMap);
  if (names) train.columns = names;
  const validation = load(files.validation);
  const test = load(files.test);
  // integer labels: the class count is the largest label over every file + 1
  for (const ds of [train, validation, test]) if (ds && labelMap) ds.classes = labelMap.classes();
  return { train, validation, test };
}

/**
 * A test file read as a checkpoint describes its run (eval): columns by the recorded names, classes
 * by the recorded class names (integer labels as they are), without the training file.
 */
export function loadCsvTestFile(
  file: string,
  spec: CsvDataSpec,
  names: CsvColumnNames,
  classNames: readonly string[] | undefined,
): Dataset {
  const table = readTable(file, spec);
  if (!table.names)
    throw new Error(
      `${file}: the checkpoint reads its columns by name (${names.features.join(', ')}, …) but data.header is false; give the file its header row and set data.header: true`,
    );
  const columns = columnsByName({ ...table, names: table.names }, names, { labelsRequired: true });
  const labelMap = spec.task === 'classification' ? labelMapFromText([], classNames) : undefined;
  return tableToDataset(table, spec, columns, labelMap);
}
