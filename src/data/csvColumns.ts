/**
 * Which CSV columns are a model's features and its label or targets: chosen in the training file by
 * the config (header names or 0-based indices), recorded by name in the checkpoint, and found by
 * name in every other file that has a header (validation and test files, eval, predict), so another
 * column order reads the same values. A file without a header is read by position.
 */
import { columnLabel } from './csv.ts';
import type { ColumnRef, CsvDataSpec } from './spec.ts';

/** The columns of a CSV run by header name, as the checkpoint's data metadata records them. */
export interface CsvColumnNames {
  /** the feature columns, in the model's input order */
  features: string[];
  /** classification: the label column */
  label?: string;
  /** regression and multi-label: the target columns, in output order */
  targets?: string[];
  /** the training file's other columns (left out by data.features): allowed in any file, never read */
  unused?: string[];
}

/** The column indices of one file. */
export interface Columns {
  label: number | undefined;
  targets: number[];
  features: number[];
}

/** What column choices need of a file: its name, header names (undefined without a header) and width. */
export interface ColumnsOfFile {
  file: string;
  names: string[] | undefined;
  width: number;
}

/** The index of a column reference in `table`, or an error naming the config field. */
function columnIndex(ref: ColumnRef, table: ColumnsOfFile, field: string): number {
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

/** The training file's columns as the config chooses them (data.label / data.targets / data.features). */
export function columnsOf(table: ColumnsOfFile, spec: CsvDataSpec): Columns {
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
        `data.features: ${columnLabel(f, table.names?.[f])} is also the ${classification ? 'label' : 'target'}; a model must not see what it predicts`,
      );
  }
  if (features.length === 0)
    throw new Error(
      `data.features: ${table.file} has no feature columns left besides the ${classification ? 'label' : 'target'}`,
    );
  return { label, targets, features };
}

/**
 * The names of the training file's chosen columns, or undefined when they cannot identify the
 * columns (no header, or two columns of one name): other files are then read by position.
 */
export function columnNamesOf(table: ColumnsOfFile, columns: Columns): CsvColumnNames | undefined {
  const names = table.names;
  if (!names || new Set(names).size !== names.length) return undefined;
  const read = new Set([
    ...columns.features,
    ...columns.targets,
    ...(columns.label === undefined ? [] : [columns.label]),
  ]);
  const out: CsvColumnNames = { features: columns.features.map((c) => names[c]!) };
  if (columns.label !== undefined) out.label = names[columns.label]!;
  if (columns.targets.length > 0) out.targets = columns.targets.map((c) => names[c]!);
  const unused = names.filter((_, c) => !read.has(c));
  if (unused.length > 0) out.unused = unused;
  return out;
}

/** What the model was trained on, for messages: `features a, b; label species`. */
export function describeColumns(names: CsvColumnNames): string {
  const parts = [`features ${names.features.join(', ')}`];
  if (names.label !== undefined) parts.push(`label ${names.label}`);
  if (names.targets) parts.push(`targets ${names.targets.join(', ')}`);
  return parts.join('; ');
}

/** How a file is matched by name. */
export interface MatchOptions {
  /** the label or targets must be present (a file with true values: validation, test, eval) */
  labelsRequired: boolean;
  /** a further column the caller reads itself (predict's --label-column): neither a feature nor unknown */
  keep?: number;
  /** added to the message about a column the model does not know (predict: how to name a label column) */
  unknownHint?: string;
}

/**
 * The columns `names` describes, found by header name in `table`. A missing feature (or a missing
 * label when required), a name given to two columns and a column the model does not know are
 * errors naming the column and the file. `dropped`: the known non-feature columns present.
 */
export function columnsByName(
  table: ColumnsOfFile & { names: string[] },
  names: CsvColumnNames,
  o: MatchOptions,
): Columns & { dropped: number[] } {
  const at = new Map<string, number>();
  table.names.forEach((n, c) => {
    const first = at.get(n);
    if (first !== undefined)
      throw new Error(
        `${table.file}: ${columnLabel(first)} and ${columnLabel(c)} are both named '${n}'; rename one so the columns can be told apart`,
      );
    at.set(n, c);
  });
  const features = names.features.map((n, i) => {
    const c = at.get(n);
    if (c === undefined)
      throw new Error(
        `${table.file}: no column '${n}', the model's feature ${i + 1} of ${names.features.length} (${names.features.join(', ')}); its columns are ${table.names.join(', ')}; add it`,
      );
    return c;
  });
  const labelNames = names.label !== undefined ? [names.label] : (names.targets ?? []);
  const what = names.label !== undefined ? 'label' : 'target';
  const labels = labelNames.map((n) => {
    const c = at.get(n);
    if (c === undefined && o.labelsRequired)
      throw new Error(
        `${table.file}: no ${what} column '${n}' (the training file's); its columns are ${table.names.join(', ')}; add it`,
      );
    return c;
  });
  const known = new Set([...features, ...labels, ...(names.unused ?? []).map((n) => at.get(n))]);
  const dropped: number[] = [];
  table.names.forEach((n, c) => {
    if (c === o.keep || features.includes(c)) return;
    if (!known.has(c))
      throw new Error(
        `${table.file}: ${columnLabel(c, n)} is not a column the model was trained on (${describeColumns(names)}); remove it from the file${o.unknownHint ?? ''}`,
      );
    dropped.push(c);
  });
  const present = labels.filter((c): c is number => c !== undefined);
  return {
    label: names.label !== undefined ? present[0] : undefined,
    targets: names.label !== undefined ? [] : present,
    features,
    dropped,
  };
}
