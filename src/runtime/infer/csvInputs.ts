/**
 * CSV rows as predict's samples, one per row. A file with a header is read by the column names the
 * checkpoint records (a CSV run's features, in the model's order, wherever they stand in the file;
 * the training label or target columns, when present, are left out); a file without a header, or a
 * checkpoint without names, is read by position. `--label-column` names a column of true labels.
 */
import { formatShape, shapeSize } from '../../tensor/shape.ts';
import { columnLabel, csvNumber, isCsvNumber, parseCsv, type CsvRecord } from '../../data/csv.ts';
import { columnsByName, type CsvColumnNames } from '../../data/csvColumns.ts';

/** Samples read from one CSV file. */
export interface CsvSamples {
  /** count × values per sample */
  data: Float32Array;
  count: number;
  /** `file:line` per sample */
  sources: string[];
  /** the --label-column's value per sample, when one was named */
  truth?: string[];
  /** one line each for people: a column left out, a header that could not be checked */
  notes: string[];
}

export interface CsvInputOptions {
  /** a column holding the true label: its header name, or its 0-based index (negative: from the end) */
  labelColumn?: string;
  /** the checkpoint's column names (a CSV run whose training file had a header) */
  columns?: CsvColumnNames;
  /** the field separator (the run's data.delimiter); default ',' */
  delimiter?: string;
}

const LABEL_HINT = ' (if it holds the true labels, name it with --label-column)';

/** The --label-column's index in a file of `width` columns (by name: in `header`), or an error naming the file. */
function labelIndex(labelColumn: string, file: string, width: number, header: string[] | undefined): number {
  if (/^-?\d+$/.test(labelColumn)) {
    const n = Number(labelColumn);
    const i = n < 0 ? width + n : n;
    if (i < 0 || i >= width)
      throw new Error(
        `${file}: --label-column ${labelColumn} is outside its ${width} columns (0..${width - 1}, or -1 for the last)`,
      );
    return i;
  }
  const i = header?.indexOf(labelColumn) ?? -1;
  if (i < 0)
    throw new Error(
      `${file}: no column named '${labelColumn}' (--label-column)${header ? `; the header has ${header.join(', ')}` : "; the file has no header, give the column's 0-based index"}`,
    );
  return i;
}

/**
 * Whether the first record names the columns: a cell other than the label column is not a number,
 * and, when the checkpoint names its columns, one of its cells is such a name (else a text label
 * in an unnamed first row would pass for a header).
 */
function isHeader(first: CsvRecord, o: CsvInputOptions): boolean {
  const cells = first.fields.map((c) => c.trim());
  const label =
    o.labelColumn !== undefined && /^-?\d+$/.test(o.labelColumn)
      ? (Number(o.labelColumn) + cells.length) % cells.length
      : undefined;
  if (!cells.some((c, i) => i !== label && !isCsvNumber(c))) return false;
  if (!o.columns) return true;
  const known = new Set([
    ...o.columns.features,
    ...(o.columns.label === undefined ? [] : [o.columns.label]),
    ...(o.columns.targets ?? []),
    ...(o.columns.unused ?? []),
  ]);
  return cells.some((c) => known.has(c));
}

/** CSV text → samples of `inputShape`; `file` names it in messages. */
export function readCsvSamples(
  text: string,
  file: string,
  inputShape: readonly number[],
  o: CsvInputOptions = {},
): CsvSamples {
  const per = shapeSize(inputShape);
  const records = parseCsv(text, file, o.delimiter ?? ',');
  if (records.length === 0) throw new Error(`${file}: no rows; a CSV input holds one sample per row`);
  const width = records[0]!.fields.length;
  const header = isHeader(records[0]!, o) ? records[0]!.fields.map((c) => c.trim()) : undefined;
  const body = header ? records.slice(1) : records;
  const label = o.labelColumn === undefined ? undefined : labelIndex(o.labelColumn, file, width, header);
  const notes: string[] = [];
  const byName = header !== undefined && o.columns !== undefined;
  let features: number[];
  if (o.columns && o.columns.features.length !== per)
    throw new Error(
      `${file}: the checkpoint names ${o.columns.features.length} feature columns but the model takes ${formatShape(inputShape)} = ${per} values per sample; the checkpoint is damaged`,
    );
  if (byName) {
    const m = columnsByName({ file, names: header, width }, o.columns!, {
      labelsRequired: false,
      keep: label,
      unknownHint: o.labelColumn === undefined ? LABEL_HINT : '',
    });
    if (label !== undefined && m.features.includes(label))
      throw new Error(
        `${file}: --label-column ${o.labelColumn} is ${columnLabel(label, header[label])}, one of the model's features; name the column that holds the true labels`,
      );
    features = m.features;
    if (o.labelColumn === undefined) {
      for (const c of [...(m.label === undefined ? [] : [m.label]), ...m.targets])
        notes.push(
          `${file}: ${columnLabel(c, header[c])}, a ${m.label === c ? 'label' : 'target'} the model was trained on, is left out of the features (--label-column ${header[c]} scores the predictions against it)`,
        );
    }
  } else {
    if (header)
      notes.push(
        `${file}: the checkpoint records no column names (trained without a CSV header, or before checkpoints recorded them), so the header is not checked: the columns are read in order`,
      );
    features = Array.from({ length: width }, (_, c) => c).filter((c) => c !== label);
    if (features.length !== per) {
      const hint =
        label === undefined && features.length === per + 1
          ? ' (one more: is a column the label? name it with --label-column)'
          : '';
      throw new Error(
        `${file}:${body[0]?.line ?? records[0]!.line}: ${features.length} feature values; the model takes ${formatShape(inputShape)} = ${per} values per sample${hint}`,
      );
    }
  }
  const data = new Float32Array(body.length * per);
  const sources: string[] = [];
  const truth: string[] = [];
  body.forEach((row, s) => {
    if (row.fields.length !== width)
      throw new Error(`${file}:${row.line}: ${row.fields.length} columns, the first row has ${width}`);
    features.forEach((c, j) => {
      const cell = row.fields[c]!;
      try {
        data[s * per + j] = csvNumber(cell, file, row.line, c, header?.[c]);
      } catch (e) {
        throw new Error(`${(e as Error).message}${o.labelColumn === undefined && !byName ? LABEL_HINT : ''}`);
      }
    });
    if (label !== undefined) truth.push(row.fields[label]!.trim());
    sources.push(`${file}:${row.line}`);
  });
  return { data, count: body.length, sources, notes, ...(label !== undefined ? { truth } : {}) };
}
