/**
 * `dataset: csv`: rows of numeric feature columns and a label column (classification: class names or
 * indices) or target columns (regression values, multi-label 0/1), chosen by header name or index.
 */
import type { Dataset } from './dataset.ts';
import { csvNumber, parseCsv, type CsvRecord } from './csv.ts';
import { labelMapFromText, type LabelMap } from './labels.ts';
import { readDataFile } from './files.ts';
import type { ColumnRef, CsvDataSpec } from './spec.ts';

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

/** The index of a column reference in `table`, or an error naming the config field. */
function columnIndex(ref: ColumnRef, table: Table, field: string): number {
  if (typeof ref === 'number') {
    const i = ref < 0 ? table.width + ref : ref;
    if (i < 0 || i >= table.width)
      throw new Error(
        `${field}: column index ${ref} is outside the ${table.width} columns of ${table.file} (0..${table.width - 1}, or -1 for the last)`,
      );
    return i;
  }
  if (!table.names)
    throw new Error(
      `${field}: column ${JSON.stringify(ref)} is a name, but data.header is false so ${table.file}'s columns have none; use a 0-based index`,
    );
  const i = table.names.indexOf(ref);
  if (i < 0)
    throw new Error(
      `${field}: ${table.file} has no column ${JSON.stringify(ref)}; its columns are ${table.names.join(', ')}`,
    );
  return i;
}

interface Columns {
  label: number | undefined;
  targets: number[];
  features: number[];
}

function columnsOf(table: Table, spec: CsvDataSpec): Columns {
  const classification = spec.task === 'classification';
  const label = classification ? columnIndex(spec.label ?? -1, table, 'data.label') : undefined;
  const targetRefs = spec.targets === undefined ? [-1] : Array.isArray(spec.targets) ? spec.targets : [spec.targets];
  const targets = classification ? [] : targetRefs.map((r) => columnIndex(r, table, 'data.targets'));
  const used = new Set([...(label === undefined ? [] : [label]), ...targets]);
  const features = spec.features
    ? spec.features.map((r) => columnIndex(r, table, 'data.features'))
    : Array.from({ length: table.width }, (_, i) => i).filter((i) => !used.has(i));
  for (const f of features) {
    if (used.has(f))
      throw new Error(
        `data.features: column ${table.names?.[f] ?? f} is also the ${classification ? 'label' : 'target'}; a model must not see what it predicts`,
      );
  }
  if (features.length === 0)
    throw new Error(
      `data.features: ${table.file} has no feature columns left besides the ${classification ? 'label' : 'target'}`,
    );
  return { label, targets, features };
}

/** The label map of the training file's label column (decides integer labels or class names). */
function trainLabelMap(table: Table, spec: CsvDataSpec): LabelMap {
  const { label } = columnsOf(table, spec);
  return labelMapFromText(
    table.rows.map((r) => r.fields[label!]!),
    spec.classNames,
  );
}

/** One CSV file as a Dataset; `labels` maps label text to classes (from the training file). */
function tableToDataset(table: Table, spec: CsvDataSpec, labelMap: LabelMap | undefined): Dataset {
  const { label, targets: targetCols, features } = columnsOf(table, spec);
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
    if (labelMap) labels[k] = labelMap.index(r.fields[label!]!, `${table.file}:${r.line}: column ${label! + 1}`);
    for (let j = 0; j < t; j++) {
      const c = targetCols[j]!;
      const v = csvNumber(r.fields[c]!, table.file, r.line, c, name(c));
      if (spec.task === 'multiLabel' && v !== 0 && v !== 1) {
        throw new Error(
          `${table.file}:${r.line}: column ${c + 1}${name(c) ? ` (${JSON.stringify(name(c))})` : ''} holds ${v}; multi-label targets are 0 or 1`,
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
 * The CSV files of a config (resolved paths): the training set decides the class names, the other
 * files are read with them. Integer labels count classes over every file.
 */
export function loadCsvFiles(
  files: { train: string; validation?: string; test?: string },
  spec: CsvDataSpec,
): Record<'train' | 'validation' | 'test', Dataset | undefined> {
  const trainTable = readTable(files.train, spec);
  const labelMap = spec.task === 'classification' ? trainLabelMap(trainTable, spec) : undefined;
  const load = (file: string | undefined) =>
    file === undefined ? undefined : tableToDataset(readTable(file, spec), spec, labelMap);
  const train = tableToDataset(trainTable, spec, labelMap);
  const validation = load(files.validation);
  const test = load(files.test);
  // integer labels: the class count is the largest label over every file + 1
  for (const ds of [train, validation, test]) if (ds && labelMap) ds.classes = labelMap.classes();
  return { train, validation, test };
}
