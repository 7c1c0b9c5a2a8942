/**
 * The rows of a reference page's Markdown tables, and the check of docs/configuration.md against what
 * the config schema accepts (schemaReference.ts).
 *
 * A reference table is one whose header's first cell names what its rows document (`field`, `layer`,
 * `option`, …). A row documents the backticked names in its first cell (`` `conv2d.filters` ``, or
 * several: `` `data.trainLimit`, `data.testLimit` ``); its `default` column, when the table has one,
 * shows the default.
 */
import type { ReferenceEntry } from './schemaReference.ts';

export interface TableRow {
  /** the header's first cell, lower case: `field`, `layer`, `option` */
  table: string;
  /** the backticked names of the first cell */
  keys: string[];
  /** the row's `default` cell, when the table has that column */
  defaultCell?: string;
  /** the whole row, for what it must mention */
  text: string;
  /** 1-based line in the page */
  line: number;
  /** the `## ` heading the table is under ('' before the first) */
  section: string;
}

/** A row's cells; `\|` inside a cell (a pipe in code) does not split it. */
export const cellsOf = (row: string): string[] =>
  row
    .trim()
    .replace(/^\|/, '')
    .replace(/(?<!\\)\|$/, '')
    .split(/(?<!\\)\|/)
    .map((c) => c.trim());

const codeSpans = (cell: string) => [...cell.matchAll(/`([^`]+)`/g)].map((m) => m[1]!.replace(/\\\|/g, '|'));

/** Every row of every table whose first header cell is one of `tables` (outside fenced code). */
export function tableRows(markdown: string, tables: readonly string[]): TableRow[] {
  const lines = markdown.split('\n');
  const rows: TableRow[] = [];
  let section = '';
  let fenced = false;
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!;
    if (line.startsWith('```')) fenced = !fenced;
    if (fenced) continue;
    if (line.startsWith('## ')) section = line.slice(3).trim();
    const isTable = (l: string | undefined) => l?.trim().startsWith('|') ?? false;
    if (!isTable(line) || isTable(lines[i - 1])) continue;
    const header = cellsOf(line).map((c) => c.toLowerCase());
    const table = header[0]!;
    if (!tables.includes(table)) continue;
    const defaultColumn = header.indexOf('default');
    // the header, then the --- row, then the rows until the table ends
    for (let j = i + 2; j < lines.length && isTable(lines[j]); j++) {
      const cells = cellsOf(lines[j]!);
      rows.push({
        table,
        keys: codeSpans(cells[0] ?? ''),
        ...(defaultColumn > 0 ? { defaultCell: cells[defaultColumn] ?? '' } : {}),
        text: lines[j]!,
        line: j + 1,
        section,
      });
    }
  }
  return rows;
}

/** Whether a default cell shows `value`: the number (`1e-5` shows 0.00001), or the word. */
export function showsDefault(cell: string, value: string | number | boolean): boolean {
  const text = cell.replace(/`/g, '');
  if (typeof value === 'number') {
    return (text.match(/[-+]?(?:\d+\.?\d*|\.\d+)(?:e[-+]?\d+)?/gi) ?? []).some((t) => Number(t) === value);
  }
  const word = String(value).replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  return new RegExp(`(^|[^\\w-])${word}($|[^\\w-])`).test(text);
}

/**
 * What docs/configuration.md gets wrong against the schema, one line each with the fix: entries
 * without a row in their table, rows naming nothing the schema has, defaults that differ, and rows
 * of fields only some dataset kinds take that do not name those kinds.
 */
export function checkReference(entries: readonly ReferenceEntry[], markdown: string, page: string): string[] {
  const tables = [...new Set(entries.map((e) => e.table))];
  const rows = tableRows(markdown, tables);
  const problems: string[] = [];
  const rowOf = new Map<string, TableRow>();
  for (const row of rows) for (const key of row.keys) rowOf.set(`${row.table} ${key}`, row);
  const known = new Set(entries.map((e) => `${e.table} ${e.key}`));

  for (const e of entries) {
    const row = rowOf.get(`${e.table} ${e.key}`);
    const what = e.choiceOf ? `the ${e.choiceOf} \`${e.key}\`` : `\`${e.key}\``;
    if (!row) {
      problems.push(
        `${page}: ${what} has no row; add one to a table headed '| ${e.table} |', the name in backticks in its first cell`,
      );
      continue;
    }
    if (e.default !== undefined && row.defaultCell !== undefined && !showsDefault(row.defaultCell, e.default)) {
      problems.push(
        `${page}:${row.line}: \`${e.key}\` defaults to ${JSON.stringify(e.default)}, but its default cell says '${row.defaultCell}'`,
      );
    }
    const unnamed = (e.mentions ?? []).filter((m) => !row.text.includes(`\`${m}\``));
    if (unnamed.length) {
      problems.push(
        `${page}:${row.line}: \`${e.key}\` is taken by some dataset kinds only; name them in its row: ${unnamed.map((m) => `\`${m}\``).join(', ')}`,
      );
    }
  }
  for (const row of rows) {
    if (row.keys.length === 0) {
      problems.push(
        `${page}:${row.line}: a row of a \`${row.table}\` table names nothing in backticks in its first cell`,
      );
    }
    for (const key of row.keys) {
      if (!known.has(`${row.table} ${key}`)) {
        problems.push(
          `${page}:${row.line}: \`${key}\` (a \`${row.table}\` row) is not in the config schema; remove the row or correct the name`,
        );
      }
    }
  }
  return problems;
}
